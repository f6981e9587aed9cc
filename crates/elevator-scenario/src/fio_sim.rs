//! A fio job file made ready for the simulator, for every caller that
//! runs one there (`elevator run JOB.fio --engine sim`, `tune`): the plan
//! on the simulated device, the host for `direct=0` jobs, where each file
//! lies, the control groups of `cgroup=`, and the [`FioRun`].
//!
//! Every `/dev/...` path is the simulated device; `/dev/null` and
//! `/dev/zero` reach no device. Files do not exist before the run (fio lays
//! them out before its jobs start, untimed): they are regions of the
//! device, or files of the host's file system when some job goes through
//! the page cache, in which case direct jobs use the same files' blocks.
//! (When the one policy-stack builder lands, it takes the job file from
//! here.)

use elevator_core::{GroupId, GroupTree, IoClass, IoMax, IoPrio, QueueLimits, SECTOR_SIZE};
use elevator_host::HostParams;
use elevator_workload::fio::options::Engine;
use elevator_workload::fio::{Existing, FioRun, JobFile, Place, Setup};

/// Files on a device without a host start on 1 MiB boundaries.
const FILE_ALIGN: u64 = 1 << 20;

/// The simulated host of a job file's buffered jobs: 2.6.32's (the most
/// recent host modelled), with its memory and CPUs.
pub fn host_params() -> HostParams {
    HostParams::linux_2_6_32()
}

/// `$pagesize`, `$mb_memory`, `$ncpus` of the simulated host.
pub fn keywords() -> elevator_workload::fio::parse::Keywords {
    let h = host_params();
    elevator_workload::fio::parse::Keywords {
        pagesize: elevator_host::params::PAGE_SIZE,
        mb_memory: h.memory >> 20,
        ncpus: u64::from(h.cpus),
    }
}

/// A job file set up on a simulated device.
#[derive(Debug)]
pub struct SimFio {
    pub run: FioRun,
    /// Control groups of the jobs' `cgroup=` (give them to the policy).
    pub groups: GroupTree,
    /// Whether some job goes through the host's page cache.
    pub hosted: bool,
    pub host: HostParams,
    /// Where a run here differs in a way worth saying.
    pub notes: Vec<String>,
}

fn is_null(path: &str) -> bool {
    path == "/dev/null" || path == "/dev/zero"
}

/// Set `file` up on a device with `limits`, named `device` in messages.
pub fn setup(
    file: &JobFile,
    limits: &QueueLimits,
    device: &str,
    seed: u64,
) -> Result<SimFio, String> {
    let capacity = limits.capacity * SECTOR_SIZE;
    let existing = |p: &str| {
        if is_null(p) {
            Existing::Null
        } else if p.starts_with("/dev/") {
            Existing::Device(capacity)
        } else {
            Existing::Missing
        }
    };
    let plan = file.plan(&existing, capacity).map_err(|e| e.to_string())?;
    // Which threads go through the page cache.
    let hosted: Vec<bool> = plan
        .threads
        .iter()
        .map(|t| {
            let j = &file.jobs[t.job];
            !j.o.direct
                && j.o.engine != Engine::Null
                && t.files.iter().all(|f| !is_null(&plan.files[f.file].path))
        })
        .collect();
    let mut notes = Vec::new();
    for (t, h) in plan.threads.iter().zip(&hosted) {
        if !h {
            continue;
        }
        let j = &file.jobs[t.job];
        for f in &t.files {
            let p = &plan.files[f.file].path;
            if p.starts_with("/dev/") {
                return Err(format!(
                    "{}:{}: [{}] direct=0 on {p}: buffered I/O to the block device itself is not \
                     modelled (the simulated host caches file pages); use direct=1 or a file",
                    j.file.display(),
                    j.line,
                    j.section
                ));
            }
        }
        if j.depth > 1 && t.clone == 0 {
            notes.push(format!(
                "{}: direct=0 runs through the simulated page cache one system call at a time \
                 (as libaio's io_submit blocks for buffered I/O; io_uring would run {} at once \
                 in its workers)",
                j.name, j.depth
            ));
        }
    }
    let any_hosted = hosted.iter().any(|h| *h);
    let params = host_params();
    let n_threads = plan.threads.len();
    let mut host = None;
    let mut host_files = Vec::new();
    let places: Vec<Place> = if any_hosted {
        let sizes: Vec<u64> = plan
            .files
            .iter()
            .map(|f| {
                if matches!(f.existing, Existing::Missing) {
                    f.size
                } else {
                    0
                }
            })
            .collect();
        let (h, files) = elevator_host::fio::host_with_files(
            params.clone(),
            limits.capacity,
            &sizes,
            seed,
            n_threads as u32 + 1,
        )
        .map_err(|_| {
            format!(
                "{}: the job file's files ({} bytes) do not fit the simulated host's file \
                 system on {device} ({capacity} bytes)",
                file.path.display(),
                sizes.iter().sum::<u64>()
            )
        })?;
        let places = plan
            .files
            .iter()
            .zip(&files)
            .map(|(f, id)| match f.existing {
                Existing::Null => Place::null(),
                Existing::Device(b) => Place::at(0, b),
                _ => Place {
                    extents: elevator_host::fio::extents(&h, *id, f.size),
                    null: false,
                },
            })
            .collect();
        host_files = files;
        host = Some(h);
        places
    } else {
        let mut next = 0u64;
        let mut places = Vec::new();
        for f in &plan.files {
            places.push(match f.existing {
                Existing::Null => Place::null(),
                Existing::Device(b) => Place::at(0, b),
                _ => {
                    let at = next.div_ceil(FILE_ALIGN) * FILE_ALIGN;
                    if at + f.size > capacity {
                        return Err(format!(
                            "{}: {} ({} bytes) does not fit on the simulated {device} \
                             ({capacity} bytes) after the job file's other files",
                            file.path.display(),
                            f.path,
                            f.size
                        ));
                    }
                    next = at + f.size;
                    Place::at(at / SECTOR_SIZE, f.size)
                }
            });
        }
        places
    };
    let (groups, group_of) = groups(file);
    let mut run = FioRun::new(Setup {
        jobs: &file.jobs,
        plan: &plan,
        places,
        seed,
        groups: group_of.clone(),
        hosted: hosted.clone(),
        first_task: 1,
    });
    run.max_request = limits.max_sectors;
    run.null_cost = params.syscall_cpu;
    if let Some(mut h) = host {
        let shared = run.shared();
        for (i, t) in plan.threads.iter().enumerate() {
            if !hosted[i] {
                continue;
            }
            let j = &file.jobs[t.job];
            elevator_host::fio::spawn(
                &mut h,
                shared.clone(),
                i,
                &j.name,
                host_files.clone(),
                prio(j),
            );
            let pid = h.process_count() - 1;
            if group_of[t.job] != GroupId::ROOT {
                h.set_group(pid, group_of[t.job]);
            }
            run.set_task_thread(h.task_of(pid), i);
        }
        run.set_host(Box::new(h));
    }
    Ok(SimFio {
        run,
        groups,
        hosted: any_hosted,
        host: params,
        notes,
    })
}

/// The control groups of the jobs' `cgroup=` and `cgroup_weight=`, and
/// each job's group.
pub fn groups(file: &JobFile) -> (GroupTree, Vec<GroupId>) {
    let mut groups = GroupTree::default();
    let of = file
        .jobs
        .iter()
        .map(|j| match &j.o.cgroup {
            None => GroupId::ROOT,
            Some(name) => groups.find(name).unwrap_or_else(|| {
                groups.add(
                    name,
                    GroupId::ROOT,
                    j.o.cgroup_weight.unwrap_or(elevator_core::DEFAULT_WEIGHT),
                    IoMax::default(),
                )
            }),
        })
        .collect();
    (groups, of)
}

/// The priority a job's threads run at (host processes).
fn prio(j: &elevator_workload::fio::Job) -> IoPrio {
    match (j.o.prioclass, j.o.prio) {
        (None, None) => IoPrio::from_nice(j.o.nice.clamp(-20, 19) as i8),
        (c, l) => IoPrio::new(
            match c.unwrap_or(2) {
                1 => IoClass::RealTime,
                3 => IoClass::Idle,
                _ => IoClass::BestEffort,
            },
            l.unwrap_or(4) as u8,
        ),
    }
}
