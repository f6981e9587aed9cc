//! `io.cost.model` and `io.cost.qos`: the iocost controller's parameters,
//! parsed in the kernel's syntax.
//!
//! After block/blk-iocost.c (Linux 5.4–5.9, Tejun Heo and Andy Newell):
//! `ioc_cost_model_write` and `ioc_qos_write`, the built-in `autop[]`
//! profiles and `calc_lcoefs`. Syntax (without the `MAJ:MIN` the kernel
//! files start with, since a run has one device):
//!
//! ```text
//! io.cost.model  ctrl=auto|user model=linear rbps=N rseqiops=N rrandiops=N
//!                wbps=N wseqiops=N wrandiops=N
//! io.cost.qos    enable=0|1 ctrl=auto|user rpct=P rlat=US wpct=P wlat=US
//!                min=P max=P
//! ```
//!
//! As in the kernel, a coefficient or QoS value given makes the set `user`
//! and keeps the profile's values for the keys not given; `ctrl=auto`
//! drops every override. Percentages take up to two decimals
//! (`cgroup_parse_float(.., 2, ..)`); `min` and `max` are clamped to
//! 1 %..10000 % and must satisfy `min <= max`.

use std::fmt;

/// 1 s of device time in vtime units (`VTIME_PER_SEC`, 2^37).
pub const VTIME_PER_SEC: u64 = 1 << 37;
/// `VTIME_PER_USEC`: the vrate of 100 %.
pub const VTIME_PER_USEC: u64 = VTIME_PER_SEC / 1_000_000;
/// `VTIME_PER_NSEC` (rounded down as the kernel's integer division does).
pub const VTIME_PER_NSEC: u64 = VTIME_PER_SEC / 1_000_000_000;
/// Costs are counted per 4 KiB page (`IOC_PAGE_SHIFT` 12).
pub const IOC_PAGE_SIZE: u64 = 4096;
/// `VRATE_MIN_PPM`: vrate may fall to 1 % of the model's rate.
pub const VRATE_MIN_PPM: u32 = 10_000;
/// `VRATE_MAX_PPM`: and rise to 10000 %.
pub const VRATE_MAX_PPM: u32 = 100_000_000;
const MILLION: u64 = 1_000_000;

/// The linear model's six inputs (`i_lcoefs`): bytes/s and 4 KiB IOPS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearModel {
    pub rbps: u64,
    pub rseqiops: u64,
    pub rrandiops: u64,
    pub wbps: u64,
    pub wseqiops: u64,
    pub wrandiops: u64,
}

/// Per-I/O costs in vtime units (`lcoefs`), from [`LinearModel::lcoefs`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lcoefs {
    pub rpage: u64,
    pub rseqio: u64,
    pub rrandio: u64,
    pub wpage: u64,
    pub wseqio: u64,
    pub wrandio: u64,
}

/// `io.cost.qos`'s values (`qos[]`): percentiles in ppm, latencies in µs,
/// the vrate range in ppm of the model's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Qos {
    pub rppm: u32,
    pub rlat_us: u32,
    pub wppm: u32,
    pub wlat_us: u32,
    pub min_ppm: u32,
    pub max_ppm: u32,
}

/// One of the kernel's built-in parameter sets (`autop[]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    pub name: &'static str,
    pub model: LinearModel,
    pub qos: Qos,
}

const fn profile_qos(lat_us: u32) -> Qos {
    Qos {
        rppm: 0,
        rlat_us: lat_us,
        wppm: 0,
        wlat_us: lat_us,
        min_ppm: VRATE_MIN_PPM,
        max_ppm: VRATE_MAX_PPM,
    }
}

/// `AUTOP_HDD`: rotational devices; 250 ms latency targets.
pub const AUTOP_HDD: Profile = Profile {
    name: "hdd",
    model: LinearModel {
        rbps: 174_019_176,
        rseqiops: 41_708,
        rrandiops: 370,
        wbps: 178_075_866,
        wseqiops: 42_705,
        wrandiops: 378,
    },
    qos: profile_qos(250_000),
};

/// `AUTOP_SSD_QD1`: flash with a queue depth of 1 (SATA SSDs with broken NCQ).
pub const AUTOP_SSD_QD1: Profile = Profile {
    name: "ssd-qd1",
    model: LinearModel {
        rbps: 245_855_193,
        rseqiops: 61_575,
        rrandiops: 6_946,
        wbps: 141_365_009,
        wseqiops: 33_716,
        wrandiops: 26_796,
    },
    qos: profile_qos(25_000),
};

/// `AUTOP_SSD_DFL`: other flash; 25 ms latency targets.
pub const AUTOP_SSD_DFL: Profile = Profile {
    name: "ssd",
    model: LinearModel {
        rbps: 488_636_629,
        rseqiops: 8_932,
        rrandiops: 8_518,
        wbps: 427_891_549,
        wseqiops: 28_755,
        wrandiops: 21_940,
    },
    qos: profile_qos(25_000),
};

impl Profile {
    /// The profile `ioc_autop_idx` picks first: HDD if rotational, QD1 if
    /// the device takes one command at a time, else the default SSD set.
    /// (The kernel later steps between SSD_DFL and SSD_FAST when vrate
    /// stays above 500 % or below 10 % for 10 s; we do not switch.)
    pub fn for_device(rotational: bool, queue_depth: u32) -> Profile {
        if rotational {
            AUTOP_HDD
        } else if queue_depth <= 1 {
            AUTOP_SSD_QD1
        } else {
            AUTOP_SSD_DFL
        }
    }
}

fn div_round_up(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

impl LinearModel {
    /// `calc_lcoefs` for each direction: page cost = 1 s / (bps / 4096);
    /// sequential and random base costs = 1 s / iops − page cost, or 0.
    pub fn lcoefs(&self) -> Lcoefs {
        let calc = |bps: u64, seqiops: u64, randiops: u64| {
            let mut page = 0;
            let (mut seqio, mut randio) = (0, 0);
            if bps != 0 {
                page = div_round_up(VTIME_PER_SEC, div_round_up(bps, IOC_PAGE_SIZE));
            }
            if seqiops != 0 {
                let v = div_round_up(VTIME_PER_SEC, seqiops);
                if v > page {
                    seqio = v - page;
                }
            }
            if randiops != 0 {
                let v = div_round_up(VTIME_PER_SEC, randiops);
                if v > page {
                    randio = v - page;
                }
            }
            (page, seqio, randio)
        };
        let (rpage, rseqio, rrandio) = calc(self.rbps, self.rseqiops, self.rrandiops);
        let (wpage, wseqio, wrandio) = calc(self.wbps, self.wseqiops, self.wrandiops);
        Lcoefs {
            rpage,
            rseqio,
            rrandio,
            wpage,
            wseqio,
            wrandio,
        }
    }
}

/// A bad `io.cost.model` or `io.cost.qos` string (the kernel's `-EINVAL`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamError {
    pub file: &'static str,
    pub message: String,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

impl std::error::Error for ParamError {}

/// What `io.cost.model` says: `ctrl=auto`, or user coefficients over the
/// device's profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelSpec {
    pub user: bool,
    /// rbps, rseqiops, rrandiops, wbps, wseqiops, wrandiops, where given.
    pub coefs: [Option<u64>; 6],
}

/// What `io.cost.qos` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QosSpec {
    /// `enable=1` turns the controller on (the kernel's `ioc->enabled`).
    pub enable: bool,
    pub user: bool,
    /// rpct, rlat, wpct, wlat, min, max (ppm or µs, as [`Qos`]), where given.
    pub values: [Option<u32>; 6],
}

impl Default for QosSpec {
    /// A scenario that asks for iocost without QoS: enabled, `ctrl=auto`.
    fn default() -> Self {
        QosSpec {
            enable: true,
            user: false,
            values: [None; 6],
        }
    }
}

/// A run's iocost settings: its `io.cost.model` and `io.cost.qos`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IocostSpec {
    pub model: ModelSpec,
    pub qos: QosSpec,
}

const MODEL_KEYS: [&str; 6] = [
    "rbps",
    "rseqiops",
    "rrandiops",
    "wbps",
    "wseqiops",
    "wrandiops",
];
const QOS_KEYS: [&str; 6] = ["rpct", "rlat", "wpct", "wlat", "min", "max"];

fn pairs<'a>(
    file: &'static str,
    text: &'a str,
) -> impl Iterator<Item = Result<(&'a str, &'a str), ParamError>> + 'a {
    text.split_whitespace().map(move |tok| {
        tok.split_once('=').ok_or_else(|| ParamError {
            file,
            message: format!("'{tok}' is not key=value"),
        })
    })
}

/// A percentage with up to two decimals, in hundredths of a percent.
fn parse_pct(file: &'static str, key: &str, v: &str) -> Result<u64, ParamError> {
    let bad = || ParamError {
        file,
        message: format!("{key}={v}: expected a percentage with at most two decimals"),
    };
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if int.is_empty() || frac.len() > 2 {
        return Err(bad());
    }
    let int: u64 = int.parse().map_err(|_| bad())?;
    let frac_v: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| bad())?
    };
    let frac_v = if frac.len() == 1 { frac_v * 10 } else { frac_v };
    int.checked_mul(100)
        .and_then(|x| x.checked_add(frac_v))
        .ok_or_else(bad)
}

impl std::str::FromStr for ModelSpec {
    type Err = ParamError;

    fn from_str(text: &str) -> Result<Self, ParamError> {
        const FILE: &str = "io.cost.model";
        let err = |message: String| ParamError {
            file: FILE,
            message,
        };
        let mut spec = ModelSpec::default();
        let mut auto = false;
        for pair in pairs(FILE, text) {
            let (k, v) = pair?;
            match k {
                "ctrl" => match v {
                    "auto" => auto = true,
                    "user" => spec.user = true,
                    _ => return Err(err(format!("ctrl={v}: expected auto or user"))),
                },
                "model" if v == "linear" => {}
                "model" => return Err(err(format!("model={v}: only linear exists"))),
                _ => {
                    let i = MODEL_KEYS.iter().position(|m| *m == k).ok_or_else(|| {
                        err(format!(
                            "unknown key '{k}' (ctrl, model, {})",
                            MODEL_KEYS.join(", ")
                        ))
                    })?;
                    let n: u64 = v
                        .parse()
                        .map_err(|_| err(format!("{k}={v}: expected a whole number")))?;
                    spec.coefs[i] = Some(n);
                    spec.user = true;
                }
            }
        }
        if auto {
            return Ok(ModelSpec::default());
        }
        Ok(spec)
    }
}

impl ModelSpec {
    /// The model in force on a device whose profile is `profile`.
    pub fn resolve(&self, profile: &Profile) -> LinearModel {
        let p = profile.model;
        let base = [
            p.rbps,
            p.rseqiops,
            p.rrandiops,
            p.wbps,
            p.wseqiops,
            p.wrandiops,
        ];
        let v: Vec<u64> = if self.user {
            base.iter()
                .zip(self.coefs)
                .map(|(b, c)| c.unwrap_or(*b))
                .collect()
        } else {
            base.to_vec()
        };
        LinearModel {
            rbps: v[0],
            rseqiops: v[1],
            rrandiops: v[2],
            wbps: v[3],
            wseqiops: v[4],
            wrandiops: v[5],
        }
    }
}

impl std::str::FromStr for QosSpec {
    type Err = ParamError;

    fn from_str(text: &str) -> Result<Self, ParamError> {
        const FILE: &str = "io.cost.qos";
        let err = |message: String| ParamError {
            file: FILE,
            message,
        };
        let mut spec = QosSpec::default();
        let mut auto = false;
        for pair in pairs(FILE, text) {
            let (k, v) = pair?;
            match k {
                "enable" => match v {
                    "0" => spec.enable = false,
                    "1" => spec.enable = true,
                    _ => return Err(err(format!("enable={v}: expected 0 or 1"))),
                },
                "ctrl" => match v {
                    "auto" => auto = true,
                    "user" => spec.user = true,
                    _ => return Err(err(format!("ctrl={v}: expected auto or user"))),
                },
                "rpct" | "wpct" => {
                    let p = parse_pct(FILE, k, v)?;
                    if p > 100 * 100 {
                        return Err(err(format!("{k}={v}: at most 100")));
                    }
                    spec.values[if k == "rpct" { 0 } else { 2 }] = Some((p * 100) as u32);
                    spec.user = true;
                }
                "rlat" | "wlat" => {
                    let us: u32 = v
                        .parse()
                        .map_err(|_| err(format!("{k}={v}: expected microseconds")))?;
                    spec.values[if k == "rlat" { 1 } else { 3 }] = Some(us);
                    spec.user = true;
                }
                "min" | "max" => {
                    let p = parse_pct(FILE, k, v)?.saturating_mul(100);
                    let ppm = p.clamp(u64::from(VRATE_MIN_PPM), u64::from(VRATE_MAX_PPM));
                    spec.values[if k == "min" { 4 } else { 5 }] = Some(ppm as u32);
                    spec.user = true;
                }
                _ => {
                    return Err(err(format!(
                        "unknown key '{k}' (enable, ctrl, {})",
                        QOS_KEYS.join(", ")
                    )))
                }
            }
        }
        if auto {
            spec.user = false;
            spec.values = [None; 6];
        }
        if let (Some(min), Some(max)) = (spec.values[4], spec.values[5]) {
            if min > max {
                return Err(err(format!(
                    "min ({}%) above max ({}%)",
                    f64::from(min) / 1e4,
                    f64::from(max) / 1e4
                )));
            }
        }
        Ok(spec)
    }
}

impl QosSpec {
    /// The QoS values in force on a device whose profile is `profile`.
    pub fn resolve(&self, profile: &Profile) -> Qos {
        let p = profile.qos;
        if !self.user {
            return p;
        }
        let v = self.values;
        let q = Qos {
            rppm: v[0].unwrap_or(p.rppm),
            rlat_us: v[1].unwrap_or(p.rlat_us),
            wppm: v[2].unwrap_or(p.wppm),
            wlat_us: v[3].unwrap_or(p.wlat_us),
            min_ppm: v[4].unwrap_or(p.min_ppm),
            max_ppm: v[5].unwrap_or(p.max_ppm),
        };
        Qos {
            min_ppm: q.min_ppm.min(q.max_ppm),
            ..q
        }
    }
}

/// The vrate (vtime per µs) of `ppm` parts per million of the model's rate,
/// rounded up for the minimum and down for the maximum as
/// `ioc_refresh_params` does.
pub fn vrate_of_ppm(ppm: u32, round_up: bool) -> u64 {
    let x = u64::from(ppm) * VTIME_PER_USEC;
    if round_up {
        div_round_up(x, MILLION)
    } else {
        x / MILLION
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcoefs_follow_calc_lcoefs() {
        let c = AUTOP_SSD_DFL.model.lcoefs();
        // 488636629 B/s = 119296 pages/s (rounded up): 2^37 / 119296.
        assert_eq!(
            c.rpage,
            VTIME_PER_SEC.div_ceil(488_636_629u64.div_ceil(4096))
        );
        assert_eq!(c.rrandio, VTIME_PER_SEC.div_ceil(8518) - c.rpage);
        // A zero IOPS figure leaves the base cost 0.
        let m = LinearModel {
            rseqiops: 0,
            ..AUTOP_HDD.model
        };
        assert_eq!(m.lcoefs().rseqio, 0);
    }

    #[test]
    fn model_strings_parse_as_the_kernel_reads_them() {
        let s: ModelSpec = "ctrl=user model=linear rbps=1000000 rrandiops=100"
            .parse()
            .unwrap();
        let m = s.resolve(&AUTOP_SSD_DFL);
        assert_eq!(m.rbps, 1_000_000);
        assert_eq!(m.rrandiops, 100);
        assert_eq!(m.wbps, AUTOP_SSD_DFL.model.wbps);
        let auto: ModelSpec = "ctrl=auto rbps=5".parse().unwrap();
        assert_eq!(auto.resolve(&AUTOP_HDD), AUTOP_HDD.model);
        let e = "model=quadratic".parse::<ModelSpec>().unwrap_err();
        assert!(e.to_string().contains("model=quadratic"), "{e}");
        let e = "rbps=fast".parse::<ModelSpec>().unwrap_err();
        assert!(e.to_string().contains("rbps=fast"), "{e}");
    }

    #[test]
    fn qos_strings_parse_as_the_kernel_reads_them() {
        let s: QosSpec = "enable=1 ctrl=user rpct=95.00 rlat=75000 wpct=95 wlat=150000 \
                          min=50.00 max=150.0"
            .parse()
            .unwrap();
        let q = s.resolve(&AUTOP_SSD_DFL);
        assert_eq!(q.rppm, 950_000);
        assert_eq!(q.rlat_us, 75_000);
        assert_eq!(q.wlat_us, 150_000);
        assert_eq!((q.min_ppm, q.max_ppm), (500_000, 1_500_000));
        assert!(s.enable);
        // min is clamped to 1 %.
        let s: QosSpec = "min=0.5".parse().unwrap();
        assert_eq!(s.resolve(&AUTOP_SSD_DFL).min_ppm, VRATE_MIN_PPM);
        assert!("min=80 max=60".parse::<QosSpec>().is_err());
        assert!("rpct=101".parse::<QosSpec>().is_err());
        assert!("rpct=95.123".parse::<QosSpec>().is_err());
        assert!("latency=5".parse::<QosSpec>().is_err());
        let off: QosSpec = "enable=0".parse().unwrap();
        assert!(!off.enable);
    }
}
