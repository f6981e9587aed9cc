//! Sections to jobs: globals applied in file order, each option checked,
//! fio's derived values worked out (`init.c` `fixup_options`, `add_job`),
//! every error of the file gathered, and the notes fio would print.

use super::options::{self, Distribution, Engine, Opts, Verify, ZoneMode, READ, WRITE};
use super::parse::{RawOpt, RawSection};
use super::value::Size;
use super::{FioError, FioErrors};
use std::path::PathBuf;

/// Which engine the file will run on: some options mean something on one
/// and nothing (or something unsafe) on the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
    /// The simulator: a device model, virtual time.
    Sim,
    /// The io_uring runtime: real files and devices, the real clock.
    Real,
}

/// Values given on the command line that override every job's (fio's
/// `--runtime=` and friends).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub options: Vec<(String, String)>,
    /// Run only these sections (fio's `--section`), globals always.
    pub sections: Vec<String>,
}

/// One job section with every option applied and checked.
#[derive(Clone, Debug)]
pub struct Job {
    /// The section's name.
    pub section: String,
    /// `name=` if the section set it, else the section's name: fio's
    /// `jobname`.
    pub name: String,
    pub file: PathBuf,
    pub line: usize,
    pub o: Opts,
    /// The section's own options, fio's names, as written (its JSON's
    /// "job options").
    pub options: Vec<(String, String)>,
    /// Per direction: smallest and largest block, and the alignment of
    /// random offsets.
    pub min_bs: [u64; 3],
    pub max_bs: [u64; 3],
    pub ba: [u64; 3],
    /// fio's group (a new one at `stonewall` or `new_group`).
    pub group: u32,
    /// The queue depth the job really runs at.
    pub depth: u32,
    /// `rw=read:N` (sequential hole, may be negative) or
    /// `rw=randread:N` (a new random offset every N I/Os).
    pub seq_add: i64,
    pub seq_nr: u64,
    pub zonemode: ZoneMode,
}

impl Job {
    /// The smallest block of any direction the job does.
    pub fn rw_min_bs(&self) -> u64 {
        let mut m = u64::MAX;
        for d in [READ, WRITE] {
            if self.does(d) {
                m = m.min(self.min_bs[d]);
            }
        }
        if m == u64::MAX {
            self.min_bs[READ]
        } else {
            m
        }
    }

    /// The largest block of any direction the job does.
    pub fn rw_max_bs(&self) -> u64 {
        [READ, WRITE]
            .into_iter()
            .filter(|d| self.does(*d))
            .map(|d| self.max_bs[d])
            .max()
            .unwrap_or(self.max_bs[READ])
    }

    /// Whether the job does direction `d` (reads include the verify
    /// phase of a writer).
    pub fn does(&self, d: usize) -> bool {
        match d {
            READ => self.o.rw.read || self.verifies(),
            WRITE => self.o.rw.write,
            _ => false,
        }
    }

    /// Whether written data is read back and checked.
    pub fn verifies(&self) -> bool {
        self.o.verify != Verify::None && self.o.do_verify && self.o.rw.write
    }

    /// Whether the job writes.
    pub fn writes(&self) -> bool {
        self.o.rw.write
    }

    /// The engine runs one I/O at a time (`FIO_SYNCIO`) in the job's own
    /// thread.
    pub fn synchronous(&self) -> bool {
        self.o.engine.synchronous() && !self.o.offload
    }
}

/// The result of reading a job file: its jobs, the global options, what
/// fio would note.
#[derive(Clone, Debug)]
pub struct Jobs {
    pub jobs: Vec<Job>,
    /// Options of the `[global]` sections, fio's names (its JSON's
    /// "global options").
    pub global: Vec<(String, String)>,
    /// Lines fio prints (its `note:` and `fio:` remarks), and ours where
    /// a run here differs in a way the user should know.
    pub notes: Vec<String>,
}

/// Turn sections into jobs for `runner`; every error of every section is
/// collected.
pub fn jobs(
    path: &std::path::Path,
    sections: &[RawSection],
    runner: Runner,
    overrides: &Overrides,
) -> Result<Jobs, FioErrors> {
    let mut errors: Vec<FioError> = Vec::new();
    let mut notes = Vec::new();
    let mut defaults = Opts::default();
    let mut global = Vec::new();
    let mut jobs: Vec<Job> = Vec::new();
    let mut group = 0u32;
    let mut group_jobs = 0u32;
    let override_opts: Vec<RawOpt> = overrides
        .options
        .iter()
        .map(|(k, v)| RawOpt {
            key: k.clone(),
            value: Some(v.clone()),
            file: PathBuf::from("command line"),
            line: 0,
        })
        .collect();
    let apply_all = |o: &mut Opts,
                     opts: &[RawOpt],
                     errors: &mut Vec<FioError>,
                     shown: &mut Vec<(String, String)>| {
        for opt in opts {
            let Some(name) = options::canonical(&opt.key) else {
                let why = match options::refused(&opt.key) {
                    Some(r) => format!("not supported: {r}"),
                    None => match options::closest(&opt.key) {
                        Some(c) => format!("unknown option (did you mean {c}?)"),
                        None => "unknown option".to_string(),
                    },
                };
                errors.push(opt.error(why));
                continue;
            };
            shown.retain(|(k, _)| k != name);
            shown.push((name.to_string(), opt.value.clone().unwrap_or_default()));
            if let Err(e) = options::apply(name, opt, o) {
                errors.push(opt.error(e));
            }
        }
    };
    for s in sections {
        if s.global {
            apply_all(&mut defaults, &s.opts, &mut errors, &mut global);
            continue;
        }
        if !overrides.sections.is_empty() && !overrides.sections.contains(&s.name) {
            continue;
        }
        let mut o = defaults.clone();
        // A job is named by its section unless the section says name=
        // (fio's get_new_job names the job before its options apply).
        o.name = None;
        let mut own = Vec::new();
        apply_all(&mut o, &s.opts, &mut errors, &mut own);
        let mut ignored = Vec::new();
        apply_all(&mut o, &override_opts, &mut errors, &mut ignored);
        let at = |option: &str, message: String| FioError {
            file: s.file.clone(),
            line: s.line,
            option: format!("[{}] {option}", s.name),
            message,
        };
        let name = o.name.clone().unwrap_or_else(|| s.name.clone());
        if (o.stonewall || o.new_group) && group_jobs > 0 {
            group += 1;
            group_jobs = 0;
        }
        group_jobs += 1;
        let job = match derive(s, o, name, group, runner, &mut notes, &at) {
            Ok(mut j) => {
                j.options = own;
                j
            }
            Err(mut e) => {
                errors.append(&mut e);
                continue;
            }
        };
        if let Some(w) = &job.o.wait_for {
            if !jobs.iter().any(|j| &j.name == w) {
                errors.push(at(
                    "wait_for",
                    format!("no job named {w:?} comes before this one"),
                ));
            }
        }
        jobs.push(job);
    }
    for (k, v) in &overrides.options {
        if let Some(name) = options::canonical(k) {
            global.retain(|(g, _)| g != name);
            global.push((name.to_string(), v.clone()));
        }
    }
    if errors.is_empty() && jobs.is_empty() {
        errors.push(FioError {
            file: path.to_path_buf(),
            line: 0,
            option: "[job]".into(),
            message: if overrides.sections.is_empty() {
                "no job section".into()
            } else {
                format!("no job section named {}", overrides.sections.join(", "))
            },
        });
    }
    if errors.is_empty() {
        Ok(Jobs {
            jobs,
            global,
            notes,
        })
    } else {
        Err(FioErrors(errors))
    }
}

/// fio's `fixup_options` and the checks of its option callbacks.
fn derive(
    s: &RawSection,
    mut o: Opts,
    name: String,
    group: u32,
    runner: Runner,
    notes: &mut Vec<String>,
    at: &dyn Fn(&str, String) -> FioError,
) -> Result<Job, Vec<FioError>> {
    let mut errors = Vec::new();
    let mut min_bs = [0u64; 3];
    let mut max_bs = [0u64; 3];
    for d in 0..3 {
        let (lo, hi) = if !o.bssplit[d].is_empty() {
            let lo = o.bssplit[d].iter().map(|e| e.value).min().unwrap_or(0);
            let hi = o.bssplit[d].iter().map(|e| e.value).max().unwrap_or(0);
            (lo, hi)
        } else if let Some((lo, hi)) = o.bsrange[d] {
            (lo, hi)
        } else {
            (o.bs[d], o.bs[d])
        };
        if lo == 0 {
            errors.push(at("bs", "a block size of 0".into()));
        }
        min_bs[d] = lo.max(1);
        max_bs[d] = hi.max(lo).max(1);
    }
    // fio: random jobs may align to blockalign; otherwise to the block.
    let mut ba = [0u64; 3];
    for d in 0..3 {
        ba[d] = match o.ba[d] {
            Some(a) if o.rw.random && a > 0 => a,
            _ => min_bs[d],
        };
    }
    if (0..3).any(|d| ba[d] != min_bs[d]) && !o.norandommap {
        notes.push(format!(
            "fio: Any use of blockalign= turns off randommap ({name})"
        ));
        o.norandommap = true;
    }
    // Reads need the file laid out (fio sets overwrite for them).
    if o.rw.read {
        o.overwrite = true;
    }
    let zonemode = match o.zonemode {
        Some(z) => z,
        None if o.zonesize > 0 => ZoneMode::Strided,
        None => ZoneMode::None,
    };
    if zonemode == ZoneMode::None && o.zonesize > 0 && o.zonemode.is_some() {
        errors.push(at(
            "zonemode",
            "zonemode=none and zonesize= are not compatible (fio refuses it too)".into(),
        ));
    }
    if zonemode == ZoneMode::Strided && o.zonesize == 0 {
        errors.push(at("zonesize", "zonemode=strided needs zonesize=".into()));
    }
    if zonemode == ZoneMode::Zbd {
        if o.zonesize == 0 {
            errors.push(at(
                "zonesize",
                "zonemode=zbd emulates zones on a device that has none: it needs zonesize=".into(),
            ));
        }
        if !o.create_serialize {
            errors.push(at(
                "create_serialize",
                "zonemode=zbd and create_serialize=0 are not compatible (fio refuses it too)"
                    .into(),
            ));
        }
    }
    if zonemode == ZoneMode::Strided && o.zonerange == 0 {
        o.zonerange = o.zonesize;
    }
    // Non-uniform distributions keep no random map.
    if o.distribution != Distribution::Random {
        o.norandommap = true;
    }
    // The `rw` postfix.
    let (mut seq_add, mut seq_nr) = (0i64, 1u64);
    if let Some(p) = &o.rw_postfix {
        match super::value::signed_bytes(p, o.kb_base) {
            Ok(v) if o.rw.random => {
                if v <= 0 {
                    errors.push(at(
                        "rw",
                        format!("{p:?}: a random job's postfix counts I/Os (1 or more)"),
                    ));
                }
                seq_nr = v.max(1) as u64;
            }
            Ok(v) => seq_add = v,
            Err(e) => errors.push(at("rw", e)),
        }
    }
    // Engines: sync ones run one I/O at a time.
    let mut depth = o.iodepth.max(1);
    if o.engine.synchronous() && depth > 1 && !o.offload {
        notes.push(format!(
            "note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will \
             be capped at 1 ({name}: ioengine={}, iodepth={depth})",
            o.engine.name()
        ));
        depth = 1;
    }
    if o.engine == Engine::ElevatorSim && runner == Runner::Real {
        errors.push(at(
            "ioengine",
            "elevator-sim names the simulator; run with --engine sim".into(),
        ));
    }
    // Rates.
    let any = |a: &[u64; 3]| a.iter().any(|v| *v > 0);
    if (any(&o.rate) && any(&o.rate_iops)) || (any(&o.rate_min) && any(&o.rate_iops_min)) {
        errors.push(at(
            "rate",
            "rate and rate_iops are mutually exclusive".into(),
        ));
    }
    for d in 0..3 {
        if (o.rate[d] > 0 && o.rate[d] < o.rate_min[d])
            || (o.rate_iops[d] > 0 && o.rate_iops[d] < o.rate_iops_min[d])
        {
            errors.push(at("rate_min", "the minimum rate exceeds the rate".into()));
        }
    }
    if o.time_based && o.runtime_us == 0 {
        errors.push(at(
            "time_based",
            "time_based requires a runtime/timeout setting".into(),
        ));
    }
    if o.thinktime_spin_us > o.thinktime_us {
        o.thinktime_spin_us = o.thinktime_us;
    }
    if o.buffer_compress_percentage == 100 {
        o.zero_buffers = true;
        o.buffer_compress_percentage = 0;
    } else if o.buffer_compress_percentage > 0 && o.refill_buffers.is_none() {
        o.refill_buffers = Some(true);
    }
    if o.verify != Verify::None {
        if o.refill_buffers.is_none() {
            o.refill_buffers = Some(true);
        }
        if max_bs[WRITE] != min_bs[WRITE] && o.verify_interval == 0 {
            o.verify_interval = min_bs[WRITE];
        }
        if o.verify_interval > min_bs[WRITE] {
            o.verify_interval = min_bs[WRITE];
        }
        if o.verify_interval == 0
            || min_bs[WRITE] % o.verify_interval != 0
            || max_bs[WRITE] % o.verify_interval != 0
        {
            o.verify_interval = gcd(min_bs[WRITE], max_bs[WRITE]);
        }
        if o.verify_offset + super::data::HEADER_BYTES as u64 > o.verify_interval
            && o.verify != Verify::Pattern
        {
            errors.push(at(
                "verify_offset",
                "cannot offset the verify header beyond the verify interval".into(),
            ));
        }
        if o.rw.write && o.do_verify && o.numjobs > 1 && o.filename.is_some() {
            notes.push(format!(
                "fio: multiple writers may overwrite blocks that belong to other jobs. This can \
                 cause verification failures. ({name})"
            ));
        }
        if o.rw.write && o.do_verify && o.time_based && !o.rw.read && o.verify_backlog == 0 {
            notes.push(format!(
                "fio: verification read phase will never start because write phase uses all of \
                 runtime ({name})"
            ));
        }
        if o.norandommap && o.iodepth > 1 && o.verify_write_sequence.is_none() {
            o.verify_write_sequence = Some(false);
        }
    }
    if o.atomic && !o.rw.write {
        o.atomic = false;
    }
    if !o.rw.read && !o.rw.write {
        errors.push(at("rw", "the job neither reads nor writes".into()));
    }
    for d in 0..2 {
        if o.cmdprio_percentage[d] > 0 && o.cmdprio_bssplit.is_some() {
            errors.push(at(
                "cmdprio_percentage",
                "cmdprio_percentage and cmdprio_bssplit are mutually exclusive".into(),
            ));
            break;
        }
    }
    if (o.cmdprio_percentage.iter().any(|p| *p > 0) || o.cmdprio_bssplit.is_some())
        && !matches!(o.engine, Engine::Libaio | Engine::IoUring)
    {
        errors.push(at(
            "cmdprio_percentage",
            format!(
                "per-command priorities are options of the libaio and io_uring engines, not {}",
                o.engine.name()
            ),
        ));
    }
    if o.cgroup_weight.is_some() && o.cgroup.is_none() {
        errors.push(at(
            "cgroup_weight",
            "needs cgroup= to name the group".into(),
        ));
    }
    if let Some(c) = o.prioclass {
        if c == 0 && o.prio.is_some() {
            errors.push(at("prioclass", "class 0 (none) takes no level".into()));
        }
    }
    let zones_given = matches!(o.size, Some(Size::Zones(_)))
        || matches!(o.offset, Size::Zones(_))
        || matches!(o.io_size, Some(Size::Zones(_)));
    if zones_given && zonemode != ZoneMode::Zbd {
        errors.push(at(
            "size",
            "the 'z' (zones) suffix needs zonemode=zbd".into(),
        ));
    }
    if let Some(nodes) = &o.numa_cpu_nodes {
        match runner {
            Runner::Real => errors.push(at(
                "numa_cpu_nodes",
                "CPU placement per job needs a thread per job; the io_uring runtime is one thread"
                    .into(),
            )),
            Runner::Sim => notes.push(format!(
                "{name}: numa_cpu_nodes={nodes} and numa_mem_policy place threads and buffers; the \
                 simulated host has one memory node and its CPU costs do not depend on placement"
            )),
        }
    }
    if o.numa_mem_policy.is_some() && runner == Runner::Real && o.numa_cpu_nodes.is_none() {
        errors.push(at(
            "numa_mem_policy",
            "buffer placement per job needs a thread per job; the io_uring runtime is one thread"
                .into(),
        ));
    }
    if let Some(t) = o.tiobench_threads {
        notes.push(format!(
            "{name}: threads={t} is an option of fio's tiobench profile; without profile=tiobench \
             fio ignores it, and so do we"
        ));
    }
    if o.verify != Verify::None && runner == Runner::Sim && o.do_verify && o.rw.write {
        notes.push(format!(
            "{name}: verify={:?}: the simulator reads back what was written (its I/O is \
             simulated), but simulated devices hold no data: the check itself runs on --engine \
             uring",
            o.verify
        ));
    }
    if o.atomic && runner == Runner::Sim {
        notes.push(format!(
            "{name}: atomic=1: the simulated devices never tear a write, so every write is atomic"
        ));
    }
    if o.flow != 0 && o.flow_sleep_us == 0 {
        // fio 3.x quiesces and retries at once; we do too.
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Job {
        section: s.name.clone(),
        name,
        file: s.file.clone(),
        line: s.line,
        o,
        options: Vec::new(),
        min_bs,
        max_bs,
        ba,
        group,
        depth,
        seq_add,
        seq_nr,
        zonemode,
    })
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fio::parse::{self, Keywords, Source};
    use std::path::Path;

    fn jobs_of(text: &str, runner: Runner) -> Result<Jobs, FioErrors> {
        let env = |_: &str| None;
        let t = text.to_string();
        let mut read = |_: &Path| Ok(t.clone());
        let mut src = Source {
            env: &env,
            read: &mut read,
            keywords: Keywords::default(),
            budget: 1 << 20,
        };
        let sections = parse::read(Path::new("j.fio"), &mut src)?;
        jobs(Path::new("j.fio"), &sections, runner, &Overrides::default())
    }

    #[test]
    fn globals_apply_to_the_jobs_after_them_and_jobname_is_the_section() {
        let j = jobs_of(
            "[global]\nname=g\nbs=8k\n[a]\n[global]\nbs=16k\n[b]\nname=bee\n",
            Runner::Sim,
        )
        .unwrap();
        assert_eq!(j.jobs[0].name, "a");
        assert_eq!(j.jobs[0].min_bs[READ], 8192);
        assert_eq!(j.jobs[1].name, "bee");
        assert_eq!(j.jobs[1].min_bs[READ], 16384);
        assert_eq!(j.jobs[1].options, vec![("name".into(), "bee".into())]);
        assert!(j.global.contains(&("bs".into(), "16k".into())));
    }

    #[test]
    fn sync_engines_are_capped_with_fios_note() {
        let j = jobs_of("[a]\nioengine=psync\niodepth=16\n", Runner::Sim).unwrap();
        assert_eq!(j.jobs[0].depth, 1);
        assert!(
            j.notes[0].starts_with("note: both iodepth >= 1"),
            "{:?}",
            j.notes
        );
        let j = jobs_of("[a]\nioengine=libaio\niodepth=16\n", Runner::Sim).unwrap();
        assert_eq!(j.jobs[0].depth, 16);
    }

    #[test]
    fn every_refusal_is_listed_at_once() {
        let e = jobs_of(
            "[a]\nrw=randtrim\nsprandom=1\nfrobnicate=2\niodepht=4\nioengine=rdma\n",
            Runner::Sim,
        )
        .unwrap_err();
        let text = e.to_string();
        assert_eq!(e.0.len(), 5, "{text}");
        assert!(text.contains("j.fio:2: rw:"), "{text}");
        assert!(text.contains("did you mean iodepth?"), "{text}");
        assert!(text.contains("sprandom: not supported"), "{text}");
    }

    #[test]
    fn groups_start_at_stonewall_and_new_group() {
        let j = jobs_of("[a]\n[b]\n[c]\nstonewall\n[d]\nnew_group\n", Runner::Sim).unwrap();
        let g: Vec<u32> = j.jobs.iter().map(|j| j.group).collect();
        assert_eq!(g, vec![0, 0, 1, 2]);
    }
}
