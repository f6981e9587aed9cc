//! The options: fio's names and aliases (`options.c`), each either read
//! into [`Opts`] with fio's meaning, or refused with the reason.
//!
//! Every option fio 3.x accepts that a job file for block I/O uses is
//! here. An option we cannot honour is never dropped: it is in
//! [`REFUSED`] with why, and the job file fails listing all of them.

use super::parse::RawOpt;
use super::value::{self, Size, SplitEntry};

mod names;
pub use names::{canonical, closest, refused, NAMES, REFUSED};

/// Direction index, as fio's `enum fio_ddir`.
pub const READ: usize = 0;
pub const WRITE: usize = 1;
pub const TRIM: usize = 2;

/// I/O engines we run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sync,
    Psync,
    Vsync,
    Pvsync,
    Pvsync2,
    Libaio,
    IoUring,
    Posixaio,
    Mmap,
    Null,
    /// `elevator-sim`: our own name for the simulator.
    ElevatorSim,
}

impl Engine {
    pub const ALL: &'static [(&'static str, Engine)] = &[
        ("sync", Engine::Sync),
        ("psync", Engine::Psync),
        ("vsync", Engine::Vsync),
        ("pvsync", Engine::Pvsync),
        ("pvsync2", Engine::Pvsync2),
        ("libaio", Engine::Libaio),
        ("io_uring", Engine::IoUring),
        ("posixaio", Engine::Posixaio),
        ("mmap", Engine::Mmap),
        ("null", Engine::Null),
        ("elevator-sim", Engine::ElevatorSim),
    ];

    pub fn name(self) -> &'static str {
        Engine::ALL
            .iter()
            .find(|(_, e)| *e == self)
            .map(|(n, _)| *n)
            .expect("every engine is listed")
    }

    /// fio's `FIO_SYNCIO` engines: one I/O at a time per job.
    pub fn synchronous(self) -> bool {
        matches!(
            self,
            Engine::Sync
                | Engine::Psync
                | Engine::Vsync
                | Engine::Pvsync
                | Engine::Pvsync2
                | Engine::Mmap
        )
    }
}

/// `verify=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    None,
    Md5,
    Crc64,
    Crc32c,
    /// Only the header (offset, length, sequence number, seed).
    Meta,
    /// Only `verify_pattern`.
    Pattern,
}

/// `random_distribution=`.
#[derive(Clone, Debug, PartialEq)]
pub enum Distribution {
    Random,
    Zipf(f64),
    Pareto(f64),
    /// Standard deviation in percent of the range, and the centre (0..1).
    Normal {
        dev: f64,
        center: Option<f64>,
    },
    /// `zoned:`: per direction, (access %, size %) pairs.
    Zoned([Vec<(u32, u32)>; 3]),
    /// `zoned_abs:`: per direction, (access %, bytes) pairs.
    ZonedAbs([Vec<(u32, u64)>; 3]),
    /// `sequence:`: block indices, repeated (or strided).
    Sequence(Vec<u64>),
}

/// `zonemode=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneMode {
    None,
    Strided,
    /// Zoned block device rules; fio emulates zones of `zonesize` on a
    /// device or file that has none (`zbd.c` `init_zone_info`).
    Zbd,
}

/// `steadystate=` criterion.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SteadyState {
    pub iops: bool,
    pub slope: bool,
    pub lat: bool,
    pub pct: bool,
    pub limit: f64,
}

/// `exit_what=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitWhat {
    Group,
    Stonewall,
    All,
}

/// One section's options with fio's defaults, as written (derived values
/// are worked out in `job.rs`).
#[derive(Clone, Debug)]
pub struct Opts {
    pub name: Option<String>,
    pub description: Option<String>,
    pub wait_for: Option<String>,
    pub filename: Option<String>,
    pub filename_format: String,
    pub directory: Option<String>,
    pub nrfiles: u32,
    pub filesize: Option<(u64, u64)>,
    pub file_service: FileService,
    pub rw: RwKind,
    pub rw_postfix: Option<String>,
    pub rw_sequencer_identical: bool,
    pub engine: Engine,
    pub engine_set: bool,
    pub iodepth: u32,
    pub offload: bool,
    pub size: Option<Size>,
    pub io_size: Option<Size>,
    pub fill_device: bool,
    pub offset: Size,
    pub offset_align: u64,
    pub offset_increment: Size,
    pub number_ios: u64,
    pub bs: [u64; 3],
    pub ba: [Option<u64>; 3],
    pub bsrange: [Option<(u64, u64)>; 3],
    pub bssplit: [Vec<SplitEntry>; 3],
    pub bs_unaligned: bool,
    pub bs_is_seq_rand: bool,
    pub randrepeat: bool,
    pub randseed: Option<u64>,
    pub norandommap: bool,
    pub norandommap_set: bool,
    pub softrandommap: bool,
    pub lfsr: bool,
    pub distribution: Distribution,
    pub random_sequence_stride: bool,
    pub percentage_random: [u32; 3],
    pub fsync: u64,
    pub fdatasync: u64,
    pub end_fsync: bool,
    pub fsync_on_close: bool,
    pub direct: bool,
    pub atomic: bool,
    pub overwrite: bool,
    pub loops: u32,
    pub numjobs: u32,
    pub startdelay: (u64, u64),
    pub runtime_us: u64,
    pub time_based: bool,
    pub ramp_time_us: u64,
    pub verify: Verify,
    pub do_verify: bool,
    pub verify_interval: u64,
    pub verify_offset: u64,
    pub verify_pattern: Option<Vec<u8>>,
    pub verify_fatal: bool,
    pub verify_dump: bool,
    pub verify_async: u32,
    pub verify_backlog: u64,
    pub verify_backlog_batch: u64,
    pub verify_write_sequence: Option<bool>,
    pub zonemode: Option<ZoneMode>,
    pub zonesize: u64,
    pub zonerange: u64,
    pub zoneskip: Size,
    pub zonecapacity: u64,
    pub read_beyond_wp: bool,
    pub max_open_zones: u32,
    pub job_max_open_zones: u32,
    pub zone_reset_threshold: f64,
    pub zone_reset_frequency: f64,
    pub rwmixread: u32,
    pub nice: i32,
    pub prio: Option<u32>,
    pub prioclass: Option<u32>,
    pub priohint: u32,
    pub thinktime_us: u64,
    pub thinktime_spin_us: u64,
    pub thinktime_blocks: u64,
    pub thinktime_blocks_issue: bool,
    pub thinktime_iotime_us: u64,
    pub rate: [u64; 3],
    pub rate_min: [u64; 3],
    pub rate_iops: [u64; 3],
    pub rate_iops_min: [u64; 3],
    pub poisson: bool,
    pub rate_cycle_ms: u64,
    pub rate_ignore_thinktime: bool,
    pub max_latency_us: u64,
    pub latency_target_us: u64,
    pub latency_window_us: u64,
    pub latency_percentile: f64,
    pub latency_run: bool,
    pub invalidate: bool,
    pub create_serialize: bool,
    pub create_fsync: bool,
    pub create_on_open: bool,
    pub create_only: bool,
    pub allow_file_create: bool,
    pub pre_read: bool,
    pub numa_cpu_nodes: Option<String>,
    pub numa_mem_policy: Option<String>,
    pub exitall: bool,
    pub exit_what: ExitWhat,
    pub exitall_on_error: bool,
    pub stonewall: bool,
    pub new_group: bool,
    pub thread: bool,
    pub write_bw_log: Option<String>,
    pub write_lat_log: Option<String>,
    pub write_iops_log: Option<String>,
    pub log_avg_msec: u64,
    pub log_offset: bool,
    pub log_prio: bool,
    pub per_job_logs: bool,
    pub bwavgtime_ms: u64,
    pub iopsavgtime_ms: u64,
    pub group_reporting: bool,
    pub stats: bool,
    pub zero_buffers: bool,
    pub refill_buffers: Option<bool>,
    pub scramble_buffers: bool,
    pub buffer_pattern: Option<Vec<u8>>,
    pub buffer_compress_percentage: u32,
    pub buffer_compress_chunk: u64,
    pub dedupe_percentage: u32,
    pub dedupe_global: bool,
    pub dedupe_working_set: bool,
    pub dedupe_working_set_percentage: u32,
    pub clat_percentiles: bool,
    pub lat_percentiles: bool,
    pub slat_percentiles: bool,
    pub percentile_list: Option<Vec<f64>>,
    pub gtod_reduce: bool,
    pub disable_lat: bool,
    pub disable_clat: bool,
    pub disable_slat: bool,
    pub disable_bw: bool,
    pub continue_on_error: ContinueOn,
    pub ignore_error: [Vec<i32>; 3],
    pub error_dump: bool,
    pub cgroup: Option<String>,
    pub cgroup_weight: Option<u32>,
    pub cgroup_nodelete: bool,
    pub kb_base: u32,
    pub flow_id: i64,
    pub flow: i64,
    pub flow_sleep_us: u64,
    pub steadystate: Option<SteadyState>,
    pub ss_dur_us: u64,
    pub ss_ramp_us: u64,
    pub ss_interval_us: u64,
    pub cmdprio_percentage: [u32; 2],
    pub cmdprio_class: [u32; 2],
    pub cmdprio: [u32; 2],
    pub cmdprio_hint: [u32; 2],
    pub cmdprio_bssplit: Option<[Vec<CmdprioSplit>; 2]>,
    pub tiobench_threads: Option<u64>,
    pub fallocate: String,
    pub fadvise_hint: String,
    pub unified_rw_reporting: bool,
}

/// `file_service_type=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileService {
    /// Switch files every `n` I/Os, in turn (the default, `n` = 1).
    RoundRobin(u64),
    /// A random file every `n` I/Os.
    Random(u64),
    /// All of one file, then the next.
    Sequential,
}

/// `continue_on_error=`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContinueOn {
    pub read: bool,
    pub write: bool,
    pub verify: bool,
    pub io: bool,
}

/// A `cmdprio_bssplit` entry: I/Os of `bs` bytes get class/level/hint
/// `perc` % of the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmdprioSplit {
    pub bs: u64,
    pub perc: u32,
    /// `None`: `cmdprio_class`/`cmdprio` apply.
    pub prio: Option<(u32, u32, u32)>,
}

/// `rw=`: which directions, and whether random.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RwKind {
    pub read: bool,
    pub write: bool,
    pub trim: bool,
    pub random: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            name: None,
            description: None,
            wait_for: None,
            filename: None,
            filename_format: "$jobname.$jobnum.$filenum".into(),
            directory: None,
            nrfiles: 1,
            filesize: None,
            file_service: FileService::RoundRobin(1),
            rw: RwKind {
                read: true,
                write: false,
                trim: false,
                random: false,
            },
            rw_postfix: None,
            rw_sequencer_identical: false,
            engine: Engine::Psync,
            engine_set: false,
            iodepth: 1,
            offload: false,
            size: None,
            io_size: None,
            fill_device: false,
            offset: Size::Bytes(0),
            offset_align: 0,
            offset_increment: Size::Bytes(0),
            number_ios: 0,
            bs: [4096; 3],
            ba: [None; 3],
            bsrange: [None; 3],
            bssplit: [Vec::new(), Vec::new(), Vec::new()],
            bs_unaligned: false,
            bs_is_seq_rand: false,
            randrepeat: true,
            randseed: None,
            norandommap: false,
            norandommap_set: false,
            softrandommap: false,
            lfsr: false,
            distribution: Distribution::Random,
            random_sequence_stride: false,
            percentage_random: [100; 3],
            fsync: 0,
            fdatasync: 0,
            end_fsync: false,
            fsync_on_close: false,
            direct: false,
            atomic: false,
            overwrite: false,
            loops: 1,
            numjobs: 1,
            startdelay: (0, 0),
            runtime_us: 0,
            time_based: false,
            ramp_time_us: 0,
            verify: Verify::None,
            do_verify: true,
            verify_interval: 0,
            verify_offset: 0,
            verify_pattern: None,
            verify_fatal: false,
            verify_dump: false,
            verify_async: 0,
            verify_backlog: 0,
            verify_backlog_batch: 0,
            verify_write_sequence: None,
            zonemode: None,
            zonesize: 0,
            zonerange: 0,
            zoneskip: Size::Bytes(0),
            zonecapacity: 0,
            read_beyond_wp: false,
            max_open_zones: 0,
            job_max_open_zones: 0,
            zone_reset_threshold: 1.0,
            zone_reset_frequency: 0.0,
            rwmixread: 50,
            nice: 0,
            prio: None,
            prioclass: None,
            priohint: 0,
            thinktime_us: 0,
            thinktime_spin_us: 0,
            thinktime_blocks: 1,
            thinktime_blocks_issue: false,
            thinktime_iotime_us: 0,
            rate: [0; 3],
            rate_min: [0; 3],
            rate_iops: [0; 3],
            rate_iops_min: [0; 3],
            poisson: false,
            rate_cycle_ms: 1000,
            rate_ignore_thinktime: false,
            max_latency_us: 0,
            latency_target_us: 0,
            latency_window_us: 0,
            latency_percentile: 100.0,
            latency_run: false,
            invalidate: true,
            create_serialize: true,
            create_fsync: true,
            create_on_open: false,
            create_only: false,
            allow_file_create: true,
            pre_read: false,
            numa_cpu_nodes: None,
            numa_mem_policy: None,
            exitall: false,
            exit_what: ExitWhat::Group,
            exitall_on_error: false,
            stonewall: false,
            new_group: false,
            thread: false,
            write_bw_log: None,
            write_lat_log: None,
            write_iops_log: None,
            log_avg_msec: 0,
            log_offset: false,
            log_prio: false,
            per_job_logs: true,
            bwavgtime_ms: 500,
            iopsavgtime_ms: 500,
            group_reporting: false,
            stats: true,
            zero_buffers: false,
            refill_buffers: None,
            scramble_buffers: true,
            buffer_pattern: None,
            buffer_compress_percentage: 0,
            buffer_compress_chunk: 512,
            dedupe_percentage: 0,
            dedupe_global: false,
            dedupe_working_set: false,
            dedupe_working_set_percentage: 5,
            clat_percentiles: true,
            lat_percentiles: false,
            slat_percentiles: false,
            percentile_list: None,
            gtod_reduce: false,
            disable_lat: false,
            disable_clat: false,
            disable_slat: false,
            disable_bw: false,
            continue_on_error: ContinueOn::default(),
            ignore_error: [Vec::new(), Vec::new(), Vec::new()],
            error_dump: false,
            cgroup: None,
            cgroup_weight: None,
            cgroup_nodelete: false,
            kb_base: 1024,
            flow_id: 0,
            flow: 0,
            flow_sleep_us: 0,
            steadystate: None,
            ss_dur_us: 0,
            ss_ramp_us: 0,
            ss_interval_us: 1_000_000,
            cmdprio_percentage: [0; 2],
            cmdprio_class: [1; 2],
            cmdprio: [0; 2],
            cmdprio_hint: [0; 2],
            cmdprio_bssplit: None,
            tiobench_threads: None,
            fallocate: "native".into(),
            fadvise_hint: "1".into(),
            unified_rw_reporting: false,
        }
    }
}

/// Apply one option (by its canonical name) to `o`.
pub fn apply(name: &str, opt: &RawOpt, o: &mut Opts) -> Result<(), String> {
    let raw = opt.value.as_deref();
    let need = || raw.ok_or_else(|| "needs a value (key=value)".to_string());
    let kb = o.kb_base;
    let int = |lo: u64, hi: u64| -> Result<u64, String> {
        let v = value::int(need()?, kb)?;
        if v < lo || v > hi {
            return Err(format!("{v} is outside {lo}..={hi}"));
        }
        Ok(v)
    };
    let flag = || value::boolean(raw);
    // `FIO_OPT_STR_SET`: bare sets, a number sets or clears.
    let set = || match raw {
        None => Ok(true),
        Some(v) => value::int(v, kb).map(|n| n != 0),
    };
    let time = |seconds: bool| value::time_us(need()?, seconds);
    let per = |f: &mut dyn FnMut(usize, &str) -> Result<(), String>| -> Result<(), String> {
        for (d, v) in value::per_ddir(need()?).into_iter().enumerate() {
            if let Some(v) = v {
                f(d, v)?;
            }
        }
        Ok(())
    };
    match name {
        "name" => o.name = Some(need()?.to_string()),
        "description" => o.description = Some(need()?.to_string()),
        "wait_for" => o.wait_for = Some(need()?.to_string()),
        "filename" => o.filename = Some(need()?.to_string()),
        "directory" => o.directory = Some(need()?.to_string()),
        "filename_format" => o.filename_format = need()?.to_string(),
        "unique_filename" => {
            if !flag()? {
                return Err(
                    "unique_filename=0 (clients sharing names) applies to client/server runs only"
                        .into(),
                );
            }
        }
        "nrfiles" => o.nrfiles = int(1, 1 << 20)? as u32,
        "filesize" => o.filesize = Some(value::range(need()?, kb)?),
        "file_service_type" => {
            let v = need()?;
            let (kind, n) = match v.split_once(':') {
                Some((k, n)) => (k, Some(value::int(n, kb)?.max(1))),
                None => (v, None),
            };
            o.file_service = match kind {
                "roundrobin" => FileService::RoundRobin(n.unwrap_or(1)),
                "random" => FileService::Random(n.unwrap_or(1)),
                "sequential" => FileService::Sequential,
                other => {
                    return Err(format!(
                        "{other:?}: we run roundrobin, random and sequential (zipf, pareto, normal and gauss file choice are not implemented)"
                    ))
                }
            };
        }
        "rw" => {
            let v = need()?;
            let (kind, post) = match v.split_once(':') {
                Some((k, p)) => (k.trim(), Some(p.trim().to_string())),
                None => (v.trim(), None),
            };
            let (read, write, trim, random) = match kind {
                "read" => (true, false, false, false),
                "write" => (false, true, false, false),
                "randread" => (true, false, false, true),
                "randwrite" => (false, true, false, true),
                "rw" | "readwrite" => (true, true, false, false),
                "randrw" => (true, true, false, true),
                "trim" | "randtrim" | "trimwrite" | "randtrimwrite" => {
                    return Err(format!(
                        "rw={kind}: trims need a discard operation the simulated devices and the policies do not have"
                    ))
                }
                other => {
                    return Err(format!(
                        "{other:?} is not one of read, write, randread, randwrite, rw, readwrite, randrw"
                    ))
                }
            };
            o.rw = RwKind {
                read,
                write,
                trim,
                random,
            };
            o.rw_postfix = post.filter(|p| !p.is_empty());
        }
        "rw_sequencer" => {
            let v = need()?;
            let (kind, post) = match v.split_once(':') {
                Some((k, p)) => (k, Some(p)),
                None => (v, None),
            };
            o.rw_sequencer_identical = match kind {
                "sequential" => false,
                "identical" => true,
                other => return Err(format!("{other:?} is not sequential or identical")),
            };
            if let Some(p) = post {
                o.rw_postfix = Some(p.to_string());
            }
        }
        "ioengine" => {
            let v = need()?;
            let base = v.split(':').next().unwrap_or(v);
            o.engine = Engine::ALL
                .iter()
                .find(|(n, _)| *n == base)
                .map(|(_, e)| *e)
                .ok_or_else(|| {
                    format!(
                        "engine {base:?} is not supported (we run: {}); it needs hardware or \
                         a service the simulator and the io_uring runtime do not stand in for",
                        Engine::ALL
                            .iter()
                            .map(|(n, _)| *n)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
            o.engine_set = true;
        }
        "iodepth" => o.iodepth = int(1, 65536)? as u32,
        "io_submit_mode" => {
            o.offload = match need()? {
                "inline" => false,
                "offload" => true,
                other => return Err(format!("{other:?} is not inline or offload")),
            }
        }
        "size" => o.size = Some(value::size(need()?, kb, true)?),
        "io_size" => o.io_size = Some(value::size(need()?, kb, true)?),
        "fill_device" => o.fill_device = flag()?,
        "offset" => o.offset = value::size(need()?, kb, true)?,
        "offset_align" => o.offset_align = value::int(need()?, kb)?,
        "offset_increment" => o.offset_increment = value::size(need()?, kb, true)?,
        "number_ios" => o.number_ios = value::int(need()?, kb)?,
        "bs" => per(&mut |d, v| {
            o.bs[d] = value::bytes(v, kb)?;
            o.bssplit[d].clear();
            o.bsrange[d] = None;
            Ok(())
        })?,
        "ba" => per(&mut |d, v| {
            o.ba[d] = Some(value::bytes(v, kb)?);
            Ok(())
        })?,
        "bsrange" => per(&mut |d, v| {
            o.bsrange[d] = Some(value::range(v, kb)?);
            Ok(())
        })?,
        "bssplit" => {
            for (d, v) in value::per_ddir(need()?).into_iter().enumerate() {
                let Some(v) = v else { continue };
                let entries = value::split(v, kb)?;
                let given: u32 = entries.iter().filter_map(|e| e.perc).sum();
                let missing = entries.iter().filter(|e| e.perc.is_none()).count() as u32;
                if given > 100 && missing > 1 {
                    return Err("bssplit percentages add to more than 100%".into());
                }
                let fill = if missing == 1 && entries.len() == 1 {
                    100
                } else {
                    100u32
                        .saturating_sub(given)
                        .checked_div(missing)
                        .unwrap_or(0)
                };
                o.bssplit[d] = entries
                    .into_iter()
                    .map(|e| SplitEntry {
                        value: e.value,
                        perc: Some(e.perc.unwrap_or(fill)),
                    })
                    .collect();
            }
        }
        "bs_unaligned" => o.bs_unaligned = set()?,
        "bs_is_seq_rand" => o.bs_is_seq_rand = flag()?,
        "randrepeat" => o.randrepeat = flag()?,
        "randseed" => o.randseed = Some(value::int(need()?, kb)?),
        "norandommap" => {
            o.norandommap = set()?;
            o.norandommap_set = true;
        }
        "softrandommap" => o.softrandommap = flag()?,
        "random_generator" => {
            o.lfsr = match need()? {
                "tausworthe" | "tausworthe64" => false,
                "lfsr" => true,
                other => return Err(format!("{other:?} is not tausworthe, lfsr or tausworthe64")),
            }
        }
        "random_distribution" => o.distribution = distribution(need()?, kb)?,
        "random_sequence_stride" => o.random_sequence_stride = flag()?,
        "percentage_random" => per(&mut |d, v| {
            let p = value::int(v, kb)?;
            if p > 100 {
                return Err(format!("{p} is over 100"));
            }
            o.percentage_random[d] = p as u32;
            Ok(())
        })?,
        "fsync" => o.fsync = value::int(need()?, kb)?,
        "fdatasync" => o.fdatasync = value::int(need()?, kb)?,
        "end_fsync" => o.end_fsync = flag()?,
        "fsync_on_close" => o.fsync_on_close = flag()?,
        "direct" => o.direct = flag()?,
        "buffered" => o.direct = !flag()?,
        "atomic" => o.atomic = flag()?,
        "overwrite" => o.overwrite = flag()?,
        "loops" => o.loops = int(0, u32::MAX.into())? as u32,
        "numjobs" => o.numjobs = int(1, 4096)? as u32,
        "startdelay" => {
            let v = need()?;
            let t = v.trim();
            let sep = t
                .char_indices()
                .skip(1)
                .find(|&(_, c)| c == '-' || c == ':');
            o.startdelay = match sep {
                Some((i, _)) => {
                    let a = value::time_us(&t[..i], true)?;
                    let b = value::time_us(&t[i + 1..], true)?;
                    (a.min(b), a.max(b))
                }
                None => {
                    let a = value::time_us(t, true)?;
                    (a, a)
                }
            };
        }
        "runtime" => o.runtime_us = time(true)?,
        "time_based" => o.time_based = set()?,
        "ramp_time" => o.ramp_time_us = time(true)?,
        "verify" => {
            o.verify = match need()? {
                "0" | "null" => Verify::None,
                "md5" => Verify::Md5,
                "crc64" => Verify::Crc64,
                "crc32c" | "crc32c-intel" => Verify::Crc32c,
                "meta" => Verify::Meta,
                "pattern" => Verify::Pattern,
                other => {
                    return Err(format!(
                        "verify={other}: we check md5, crc64, crc32c (crc32c-intel), meta and \
                         pattern; the others (crc32, crc16, crc7, sha*, xxhash) are not implemented"
                    ))
                }
            }
        }
        "do_verify" => o.do_verify = flag()?,
        "verify_interval" => o.verify_interval = int(1, 1 << 30)?,
        "verify_offset" => o.verify_offset = value::int(need()?, kb)?,
        "verify_pattern" => {
            o.verify_pattern = Some(pattern(need()?)?);
            if o.verify == Verify::None {
                o.verify = Verify::Pattern;
            }
        }
        "verify_fatal" => o.verify_fatal = flag()?,
        "verify_dump" => o.verify_dump = flag()?,
        "verify_async" => o.verify_async = int(0, 1024)? as u32,
        "verify_backlog" => o.verify_backlog = value::int(need()?, kb)?,
        "verify_backlog_batch" => o.verify_backlog_batch = value::int(need()?, kb)?,
        "verify_write_sequence" => o.verify_write_sequence = Some(flag()?),
        "verify_header_seed" | "verify_state_save" => {
            flag()?;
        }
        "zonemode" => {
            o.zonemode = Some(match need()? {
                "none" => ZoneMode::None,
                "strided" => ZoneMode::Strided,
                "zbd" => ZoneMode::Zbd,
                other => return Err(format!("{other:?} is not none, strided or zbd")),
            })
        }
        "zonesize" => o.zonesize = value::bytes(need()?, kb)?,
        "zonerange" => o.zonerange = value::bytes(need()?, kb)?,
        "zoneskip" => o.zoneskip = value::size(need()?, kb, true)?,
        "zonecapacity" => o.zonecapacity = value::bytes(need()?, kb)?,
        "read_beyond_wp" => o.read_beyond_wp = flag()?,
        "max_open_zones" => o.max_open_zones = int(0, 1 << 20)? as u32,
        "job_max_open_zones" => o.job_max_open_zones = int(0, 1 << 20)? as u32,
        "zone_reset_threshold" => {
            let v = value::float(need()?)?;
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{v} is outside 0..1"));
            }
            o.zone_reset_threshold = v;
        }
        "zone_reset_frequency" => {
            let v = value::float(need()?)?;
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{v} is outside 0..1"));
            }
            o.zone_reset_frequency = v;
        }
        "rwmixread" => o.rwmixread = int(0, 100)? as u32,
        "rwmixwrite" => o.rwmixread = 100 - int(0, 100)? as u32,
        "nice" => {
            let v: i32 = need()?
                .trim()
                .parse()
                .map_err(|_| "not a whole number".to_string())?;
            if !(-20..=19).contains(&v) {
                return Err(format!("{v} is outside -20..=19"));
            }
            o.nice = v;
        }
        "prio" => o.prio = Some(int(0, 7)? as u32),
        "prioclass" => o.prioclass = Some(int(0, 3)? as u32),
        "priohint" => o.priohint = int(0, 7)? as u32,
        "thinktime" => o.thinktime_us = time(false)?,
        "thinktime_spin" => o.thinktime_spin_us = time(false)?,
        "thinktime_blocks" => o.thinktime_blocks = int(1, u64::MAX >> 1)?,
        "thinktime_blocks_type" => {
            o.thinktime_blocks_issue = match need()? {
                "complete" => false,
                "issue" => true,
                other => return Err(format!("{other:?} is not complete or issue")),
            }
        }
        "thinktime_iotime" => o.thinktime_iotime_us = time(true)?,
        "rate" => per(&mut |d, v| {
            o.rate[d] = value::bytes(v, kb)?;
            Ok(())
        })?,
        "rate_min" => per(&mut |d, v| {
            o.rate_min[d] = value::bytes(v, kb)?;
            Ok(())
        })?,
        "rate_iops" => per(&mut |d, v| {
            o.rate_iops[d] = value::int(v, kb)?;
            Ok(())
        })?,
        "rate_iops_min" => per(&mut |d, v| {
            o.rate_iops_min[d] = value::int(v, kb)?;
            Ok(())
        })?,
        "rate_process" => {
            o.poisson = match need()? {
                "linear" => false,
                "poisson" => true,
                other => return Err(format!("{other:?} is not linear or poisson")),
            }
        }
        "rate_cycle" => o.rate_cycle_ms = int(1, 1 << 40)?,
        "rate_ignore_thinktime" => o.rate_ignore_thinktime = flag()?,
        "max_latency" => o.max_latency_us = time(false)?,
        "latency_target" => o.latency_target_us = time(false)?,
        "latency_window" => o.latency_window_us = time(false)?,
        "latency_percentile" => {
            let v = value::float(need()?)?;
            if !(0.0..=100.0).contains(&v) {
                return Err(format!("{v} is outside 0..100"));
            }
            o.latency_percentile = v;
        }
        "latency_run" => o.latency_run = flag()?,
        "invalidate" => o.invalidate = flag()?,
        "create_serialize" => o.create_serialize = flag()?,
        "create_fsync" => o.create_fsync = flag()?,
        "create_on_open" => o.create_on_open = flag()?,
        "create_only" => o.create_only = flag()?,
        "allow_file_create" => o.allow_file_create = flag()?,
        "allow_mounted_write" => {
            if flag()? {
                return Err("writing to a mounted device is never done here".into());
            }
        }
        "pre_read" => o.pre_read = flag()?,
        "numa_cpu_nodes" => o.numa_cpu_nodes = Some(need()?.to_string()),
        "numa_mem_policy" => o.numa_mem_policy = Some(need()?.to_string()),
        "exitall" => o.exitall = set()?,
        "exit_what" => {
            o.exit_what = match need()? {
                "group" => ExitWhat::Group,
                "stonewall" => ExitWhat::Stonewall,
                "all" => ExitWhat::All,
                other => return Err(format!("{other:?} is not group, stonewall or all")),
            }
        }
        "exitall_on_error" => o.exitall_on_error = set()?,
        "stonewall" => o.stonewall = set()?,
        "new_group" => o.new_group = set()?,
        "thread" => o.thread = set()?,
        "write_bw_log" => o.write_bw_log = Some(raw.unwrap_or("").to_string()),
        "write_lat_log" => o.write_lat_log = Some(raw.unwrap_or("").to_string()),
        "write_iops_log" => o.write_iops_log = Some(raw.unwrap_or("").to_string()),
        "log_avg_msec" => o.log_avg_msec = value::int(need()?, kb)?,
        "log_offset" => o.log_offset = flag()?,
        "log_prio" => o.log_prio = flag()?,
        "per_job_logs" => o.per_job_logs = flag()?,
        "bwavgtime" => o.bwavgtime_ms = int(1, 1 << 30)?,
        "iopsavgtime" => o.iopsavgtime_ms = int(1, 1 << 30)?,
        "group_reporting" => o.group_reporting = set()?,
        "stats" => o.stats = flag()?,
        "zero_buffers" => o.zero_buffers = set()?,
        "refill_buffers" => o.refill_buffers = Some(set()?),
        "scramble_buffers" => o.scramble_buffers = flag()?,
        "buffer_pattern" => o.buffer_pattern = Some(pattern(need()?)?),
        "buffer_compress_percentage" => o.buffer_compress_percentage = int(0, 100)? as u32,
        "buffer_compress_chunk" => o.buffer_compress_chunk = int(1, 1 << 30)?,
        "dedupe_percentage" => o.dedupe_percentage = int(0, 100)? as u32,
        "dedupe_global" => o.dedupe_global = flag()?,
        "dedupe_mode" => {
            o.dedupe_working_set = match need()? {
                "repeat" => false,
                "working_set" => true,
                other => return Err(format!("{other:?} is not repeat or working_set")),
            }
        }
        "dedupe_working_set_percentage" => o.dedupe_working_set_percentage = int(0, 100)? as u32,
        "clat_percentiles" => o.clat_percentiles = flag()?,
        "lat_percentiles" => o.lat_percentiles = flag()?,
        "slat_percentiles" => o.slat_percentiles = flag()?,
        "percentile_list" => {
            let list: Result<Vec<f64>, String> = need()?.split(':').map(value::float).collect();
            let list = list?;
            if list.is_empty() || list.len() > 20 || list.iter().any(|p| !(0.0..=100.0).contains(p))
            {
                return Err("needs 1 to 20 percentages within 0..100, separated by ':'".into());
            }
            o.percentile_list = Some(list);
        }
        "gtod_reduce" => o.gtod_reduce = flag()?,
        "disable_lat" => o.disable_lat = flag()?,
        "disable_clat" => o.disable_clat = flag()?,
        "disable_slat" => o.disable_slat = flag()?,
        "disable_bw_measurement" => o.disable_bw = flag()?,
        "continue_on_error" => {
            let mut c = ContinueOn::default();
            match need()? {
                "none" | "0" => {}
                "read" => c.read = true,
                "write" => c.write = true,
                "io" => c.io = true,
                "verify" => c.verify = true,
                "all" | "1" => {
                    c.read = true;
                    c.write = true;
                    c.verify = true;
                    c.io = true;
                }
                other => {
                    return Err(format!(
                        "{other:?} is not none, read, write, io, verify or all"
                    ))
                }
            }
            o.continue_on_error = c;
        }
        "ignore_error" => {
            let v = need()?;
            let parts: Vec<&str> = v.split(',').collect();
            for (d, list) in parts.iter().enumerate().take(3) {
                o.ignore_error[d] = list
                    .split(':')
                    .map(str::trim)
                    .filter(|e| !e.is_empty())
                    .map(errno)
                    .collect::<Result<_, _>>()?;
            }
        }
        "error_dump" => o.error_dump = flag()?,
        "cgroup" => o.cgroup = Some(need()?.to_string()),
        "cgroup_weight" => o.cgroup_weight = Some(int(1, 1000)? as u32),
        "cgroup_nodelete" => o.cgroup_nodelete = flag()?,
        "kb_base" => {
            o.kb_base = match need()? {
                "1024" => 1024,
                "1000" => 1000,
                other => return Err(format!("{other:?} is not 1024 or 1000")),
            }
        }
        "flow_id" => o.flow_id = signed(need()?)?,
        "flow" => o.flow = signed(need()?)?,
        "flow_sleep" => o.flow_sleep_us = time(false)?,
        "steadystate" => o.steadystate = steadystate(need()?)?,
        "steadystate_duration" => o.ss_dur_us = time(true)?,
        "steadystate_ramp_time" => o.ss_ramp_us = time(true)?,
        "steadystate_check_interval" => {
            let v = time(true)?;
            if v == 0 || v % 1_000_000 != 0 {
                return Err("must be a whole number of seconds".into());
            }
            o.ss_interval_us = v;
        }
        "cmdprio_percentage" => {
            let v = need()?;
            for (d, p) in two(v).into_iter().enumerate() {
                if let Some(p) = p {
                    let n = value::int(p, kb)?;
                    if n > 100 {
                        return Err(format!("{n} is over 100"));
                    }
                    o.cmdprio_percentage[d] = n as u32;
                }
            }
        }
        "cmdprio_class" => {
            for (d, p) in two(need()?).into_iter().enumerate() {
                if let Some(p) = p {
                    let n = value::int(p, kb)?;
                    if !(1..=3).contains(&n) {
                        return Err(format!("{n} is not 1 (RT), 2 (BE) or 3 (IDLE)"));
                    }
                    o.cmdprio_class[d] = n as u32;
                }
            }
        }
        "cmdprio" => {
            for (d, p) in two(need()?).into_iter().enumerate() {
                if let Some(p) = p {
                    let n = value::int(p, kb)?;
                    if n > 7 {
                        return Err(format!("{n} is over 7"));
                    }
                    o.cmdprio[d] = n as u32;
                }
            }
        }
        "cmdprio_hint" => {
            for (d, p) in two(need()?).into_iter().enumerate() {
                if let Some(p) = p {
                    o.cmdprio_hint[d] = value::int(p, kb)?.min(7) as u32;
                }
            }
        }
        "cmdprio_bssplit" => {
            let v = need()?;
            let parts: Vec<&str> = v.split(',').collect();
            let read = cmdprio_split(parts[0], kb)?;
            let write = match parts.get(1) {
                Some(w) => cmdprio_split(w, kb)?,
                None => read.clone(),
            };
            o.cmdprio_bssplit = Some([read, write]);
        }
        "threads" => o.tiobench_threads = Some(value::int(need()?, kb)?),
        "fallocate" => {
            let v = need()?;
            if !["none", "native", "posix", "keep", "truncate", "0", "1"].contains(&v) {
                return Err(format!(
                    "{v:?} is not none, native, posix, keep or truncate"
                ));
            }
            o.fallocate = v.to_string();
        }
        "fadvise_hint" => {
            let v = need()?;
            if !["0", "1", "sequential", "random", "noreuse"].contains(&v) {
                return Err(format!("{v:?} is not 0, 1, sequential, random or noreuse"));
            }
            o.fadvise_hint = v.to_string();
        }
        "unified_rw_reporting" => {
            o.unified_rw_reporting = match need()? {
                "none" | "0" => false,
                "mixed" | "1" | "both" | "2" => {
                    return Err("mixed read/write reporting is not implemented".into())
                }
                other => return Err(format!("{other:?} is not none, mixed or both")),
            }
        }
        "mem" => {
            let v = need()?;
            let kind = v.split(':').next().unwrap_or(v);
            if !["malloc", "shm", "mmap", "mmapshared"].contains(&kind) {
                return Err(format!(
                    "{v:?}: buffers are ordinary aligned memory here (malloc, shm, mmap, \
                     mmapshared accepted: none changes what reaches the device)"
                ));
            }
        }
        "clocksource" => {
            let v = need()?;
            if !["gettimeofday", "clock_gettime", "cpu"].contains(&v) {
                return Err(format!("{v:?} is not gettimeofday, clock_gettime or cpu"));
            }
        }
        other => unreachable!("option {other} is in NAMES but not applied"),
    }
    Ok(())
}

fn signed(v: &str) -> Result<i64, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{v:?} is not a whole number"))
}

/// `a,b`: the read and write values of a cmdprio option (one applies to
/// both).
fn two(v: &str) -> [Option<&str>; 2] {
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    let get = |i: usize| parts.get(i).copied().filter(|p| !p.is_empty());
    if parts.len() == 1 {
        [get(0), get(0)]
    } else {
        [get(0), get(1)]
    }
}

fn cmdprio_split(v: &str, kb: u32) -> Result<Vec<CmdprioSplit>, String> {
    let mut out = Vec::new();
    for entry in v.split(':').map(str::trim).filter(|e| !e.is_empty()) {
        let f: Vec<&str> = entry.split('/').collect();
        let bs = value::bytes(f[0], kb)?;
        let num = |i: usize| -> Result<Option<u32>, String> {
            match f.get(i).map(|s| s.trim()).filter(|s| !s.is_empty()) {
                None => Ok(None),
                Some(s) => s
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("{entry:?}: {s:?} is not a whole number")),
            }
        };
        let perc = num(1)?.unwrap_or(0).min(100);
        let prio = match (num(2)?, num(3)?) {
            (Some(c), Some(l)) => {
                if !(1..=3).contains(&c) || l > 7 {
                    return Err(format!("{entry:?}: class 1..3 and level 0..7"));
                }
                Some((c, l, num(4)?.unwrap_or(0).min(7)))
            }
            (None, None) => None,
            _ => return Err(format!("{entry:?}: give both class and level")),
        };
        out.push(CmdprioSplit { bs, perc, prio });
    }
    Ok(out)
}

fn errno(e: &str) -> Result<i32, String> {
    const NAMES: &[(&str, i32)] = &[
        ("EPERM", 1),
        ("ENOENT", 2),
        ("EINTR", 4),
        ("EIO", 5),
        ("ENXIO", 6),
        ("EAGAIN", 11),
        ("ENOMEM", 12),
        ("EACCES", 13),
        ("EFAULT", 14),
        ("EBUSY", 16),
        ("EEXIST", 17),
        ("EINVAL", 22),
        ("EFBIG", 27),
        ("ENOSPC", 28),
        ("EROFS", 30),
        ("EILSEQ", 84),
        ("EOPNOTSUPP", 95),
        ("ETIMEDOUT", 110),
        ("EDQUOT", 122),
    ];
    if let Ok(n) = e.parse::<i32>() {
        return Ok(n);
    }
    NAMES
        .iter()
        .find(|(n, _)| *n == e)
        .map(|(_, v)| *v)
        .ok_or_else(|| format!("{e:?} is not an errno we know"))
}

/// `verify_pattern`/`buffer_pattern`: `0x` hex bytes, a quoted string, or
/// a decimal number (fio's `parse_and_fill_pattern`, its common forms),
/// pieces joined by `|`.
pub fn pattern(v: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for piece in v.split('|').map(str::trim) {
        if let Some(hex) = piece
            .strip_prefix("0x")
            .or_else(|| piece.strip_prefix("0X"))
        {
            if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(format!("{piece:?} is not hex"));
            }
            let padded = if hex.len() % 2 == 1 {
                format!("0{hex}")
            } else {
                hex.to_string()
            };
            for i in (0..padded.len()).step_by(2) {
                out.push(u8::from_str_radix(&padded[i..i + 2], 16).expect("hex digits"));
            }
        } else if let Some(s) = piece
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .or_else(|| piece.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        {
            out.extend_from_slice(s.as_bytes());
        } else if let Ok(n) = piece.parse::<u32>() {
            // fio stores a decimal as the smallest little-endian integer
            // that holds it.
            let bytes = n.to_le_bytes();
            let len = (4 - n.leading_zeros() as usize / 8).max(1);
            out.extend_from_slice(&bytes[..len]);
        } else {
            return Err(format!(
                "{piece:?}: a pattern is 0x hex, \"text\" or a number (fio's %o and other \
                 formats are not implemented)"
            ));
        }
    }
    if out.is_empty() {
        return Err("an empty pattern".into());
    }
    Ok(out)
}

fn distribution(v: &str, kb: u32) -> Result<Distribution, String> {
    let (kind, post) = match v.split_once(':') {
        Some((k, p)) => (k.trim(), Some(p.trim())),
        None => (v.trim(), None),
    };
    let float_or = |def: f64| -> Result<f64, String> {
        match post {
            None | Some("") => Ok(def),
            Some(p) => value::float(p.split(':').next().unwrap_or(p)),
        }
    };
    Ok(match kind {
        "random" => Distribution::Random,
        "zipf" => {
            let t = float_or(1.1)?;
            if t == 1.0 || t <= 0.0 {
                return Err("zipf theta must be above 0 and not 1.0".into());
            }
            Distribution::Zipf(t)
        }
        "pareto" => {
            let h = float_or(0.2)?;
            if h <= 0.0 || h >= 1.0 {
                return Err("pareto input must be within (0, 1)".into());
            }
            Distribution::Pareto(h)
        }
        "normal" | "gauss" => {
            let (dev, center) = match post {
                None | Some("") => (0.0, None),
                Some(p) => match p.split_once(':') {
                    Some((d, c)) => (value::float(d)?, Some(value::float(c)?)),
                    None => (value::float(p)?, None),
                },
            };
            if !(0.0..100.0).contains(&dev) {
                return Err("normal deviation must be within 0..100".into());
            }
            if center.is_some_and(|c| !(0.0..=1.0).contains(&c)) {
                return Err("the centre must be within 0..1".into());
            }
            Distribution::Normal { dev, center }
        }
        "zoned" | "zoned_abs" => {
            let p = post.ok_or("needs zones: zoned:access%/size%:...")?;
            let abs = kind == "zoned_abs";
            let mut zoned: [Vec<(u32, u32)>; 3] = Default::default();
            let mut zabs: [Vec<(u32, u64)>; 3] = Default::default();
            for (d, part) in value::per_ddir(p).into_iter().enumerate() {
                let Some(part) = part else { continue };
                let mut entries: Vec<(Option<u32>, Option<u64>)> = Vec::new();
                for e in part.split(':').map(str::trim) {
                    if e.is_empty() {
                        break;
                    }
                    let (a, s) = match e.split_once('/') {
                        Some((a, s)) => (a, Some(s.trim()).filter(|s| !s.is_empty())),
                        None => (e, None),
                    };
                    let a = value::int(a, kb)?;
                    if a > 100 {
                        return Err(format!("{e:?}: access over 100%"));
                    }
                    let s = match s {
                        None => None,
                        Some(s) if abs => Some(value::bytes(s, kb)?),
                        Some(s) => Some(
                            s.parse::<u64>()
                                .map_err(|_| format!("{e:?}: {s:?} is not a percentage"))?
                                .min(100),
                        ),
                    };
                    entries.push((Some(a as u32), s));
                }
                let access: u32 = entries.iter().filter_map(|e| e.0).sum();
                if access != 100 {
                    return Err(format!("access percentages add to {access}, not 100"));
                }
                if abs {
                    zabs[d] = entries
                        .iter()
                        .map(|e| (e.0.unwrap_or(0), e.1.unwrap_or(0)))
                        .collect();
                } else {
                    let given: u64 = entries.iter().filter_map(|e| e.1).sum();
                    let missing = entries.iter().filter(|e| e.1.is_none()).count() as u64;
                    if given > 100 {
                        return Err("size percentages add to more than 100".into());
                    }
                    let fill = (100 - given).checked_div(missing).unwrap_or(0);
                    zoned[d] = entries
                        .iter()
                        .map(|e| (e.0.unwrap_or(0), e.1.unwrap_or(fill) as u32))
                        .collect();
                }
            }
            if abs {
                Distribution::ZonedAbs(zabs)
            } else {
                Distribution::Zoned(zoned)
            }
        }
        "sequence" => {
            let p = post.ok_or("needs block indices: sequence:2,0,1")?;
            let seq: Result<Vec<u64>, String> = p
                .split(',')
                .map(|n| {
                    n.trim()
                        .parse::<u64>()
                        .map_err(|_| format!("{n:?} is not a block index"))
                })
                .collect();
            let seq = seq?;
            if seq.is_empty() || seq.len() > 4096 {
                return Err("a sequence of 1 to 4096 block indices".into());
            }
            Distribution::Sequence(seq)
        }
        other => {
            return Err(format!(
                "{other:?} is not random, zipf, pareto, normal, gauss, zoned, zoned_abs or sequence"
            ))
        }
    })
}

fn steadystate(v: &str) -> Result<Option<SteadyState>, String> {
    let (kind, post) = match v.split_once(':') {
        Some((k, p)) => (k.trim(), p.trim()),
        None => return Err("needs a criterion and a limit, as iops:10%".into()),
    };
    let (iops, slope, lat) = match kind {
        "iops" => (true, false, false),
        "iops_slope" => (true, true, false),
        "bw" => (false, false, false),
        "bw_slope" => (false, true, false),
        "lat" => (false, false, true),
        "lat_slope" => (false, true, true),
        other => {
            return Err(format!(
                "{other:?} is not iops, iops_slope, bw, bw_slope, lat or lat_slope"
            ))
        }
    };
    let (num, pct) = match post.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (post, false),
    };
    let limit = if pct || iops || lat {
        value::float(num)?
    } else {
        value::bytes(num, 1024)? as f64
    };
    Ok(Some(SteadyState {
        iops,
        slope,
        lat,
        pct,
        limit,
    }))
}

#[cfg(test)]
mod tests;
