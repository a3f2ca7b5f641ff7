//! `make plots`: measures the pure cores (no server) and draws the README's pictures as
//! hand-written SVG into the directory given as the first argument (default `docs/img`).
//!
//! * `lc-error.svg`: relative error (RMSE over `COUNTERS` counters reserved `0.01 50000`) versus
//!   n, against linear counting's theory `sqrt(m(e^t − t − 1))/n` and against HyperLogLog —
//!   measured with Redis's HLL layout (2^14 six-bit registers, rank of the remaining 50 bits)
//!   and its estimator (Ertl's improved raw estimator, which Redis uses since 5.0), fed from
//!   the same items, plus its theoretical 1.04/√16384 = 0.81 %.
//! * `bf-fp.svg`: false-positive rate versus fill (items/capacity, 0 to 1.5) for error rates
//!   0.01 and 0.001, non-scaling (which refuses items past capacity) and scaling (expansion 2),
//!   measured with `QUERIES` never-added items (points with ≥ 10 hits), against the expected rate of the filters'
//!   actual geometry.
//!
//! Fixed seeds: the pictures only change when the code does.

use std::fmt::Write as _;

use lcbloom::bloom::chain::Chain;
use lcbloom::core::hashing::hash_item;
use lcbloom::lc::counter::Counter;
use lcbloom::lc::levels::ml_relative_error;
use xxhash_rust::xxh3::xxh3_64_with_seed;

const COUNTERS: u64 = 100;
const LC_CAPACITY: u64 = 50_000;
const LC_MAX_N: u64 = 1_000_000;
const BF_CAPACITY: u64 = 20_000;
const QUERIES: u64 = 500_000;

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "docs/img".into());
    std::fs::create_dir_all(&dir).expect("create output directory");
    let lc = lc_error_plot();
    std::fs::write(format!("{dir}/lc-error.svg"), lc).expect("write lc-error.svg");
    let bf = bf_fp_plot();
    std::fs::write(format!("{dir}/bf-fp.svg"), bf).expect("write bf-fp.svg");
    println!("wrote {dir}/lc-error.svg and {dir}/bf-fp.svg");
}

/// Item `i` of stream `s`: 16 distinct bytes.
fn item(s: u64, i: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&s.to_le_bytes());
    b[8..].copy_from_slice(&i.to_le_bytes());
    b
}

// ---- Linear counting against HyperLogLog ---------------------------------------------------

/// Redis's HyperLogLog: 2^14 registers of the rank (1 + trailing zeros) of the hash's top 50
/// bits, index from the low 14 bits.
struct Hll {
    registers: Vec<u8>,
}

const HLL_P: u32 = 14;
const HLL_Q: u32 = 64 - HLL_P;
const HLL_M: usize = 1 << HLL_P;

impl Hll {
    fn new() -> Self {
        Hll {
            registers: vec![0; HLL_M],
        }
    }

    fn add(&mut self, hash: u64) {
        let index = (hash as usize) & (HLL_M - 1);
        let rank = ((hash >> HLL_P) | (1 << HLL_Q)).trailing_zeros() as u8 + 1;
        let r = &mut self.registers[index];
        *r = (*r).max(rank);
    }

    /// Ertl, "New cardinality estimation algorithms for HyperLogLog sketches" (2017), the
    /// improved raw estimator: σ corrects for empty registers, τ for saturated ones.
    fn count(&self) -> f64 {
        let mut histogram = [0u32; HLL_Q as usize + 2];
        for &r in &self.registers {
            histogram[r as usize] += 1;
        }
        let m = HLL_M as f64;
        let mut z = m * tau((m - histogram[HLL_Q as usize + 1] as f64) / m);
        for j in (1..=HLL_Q as usize).rev() {
            z = (z + histogram[j] as f64) * 0.5;
        }
        z += m * sigma(histogram[0] as f64 / m);
        (0.5 / std::f64::consts::LN_2 * m * m / z).round()
    }
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if z == previous {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if z == previous {
            return z / 3.0;
        }
    }
}

/// ~40 checkpoints from 100 to `LC_MAX_N`, evenly spaced on a log scale.
fn checkpoints() -> Vec<u64> {
    let steps = 40;
    let ratio = (LC_MAX_N as f64 / 100.0).ln() / steps as f64;
    let mut points: Vec<u64> = (0..=steps)
        .map(|i| (100.0 * (ratio * i as f64).exp()).round() as u64)
        .collect();
    points.dedup();
    points
}

fn lc_error_plot() -> String {
    let points = checkpoints();
    let mut lc_sq = vec![0.0; points.len()];
    let mut hll_sq = vec![0.0; points.len()];
    for s in 0..COUNTERS {
        let mut counter = Counter::reserve(0.01, LC_CAPACITY, u64::MAX).expect("reserve");
        let mut hll = Hll::new();
        let mut n = 0;
        for (j, &target) in points.iter().enumerate() {
            while n < target {
                let h = hash_item(&item(s, n));
                counter.add_hash(h.h1).expect("add");
                // An independent 64-bit hash for the HLL (Redis uses MurmurHash64A; h2 is
                // forced odd for double hashing, so it cannot serve).
                hll.add(xxh3_64_with_seed(&item(s, n), 0x484c4c));
                n += 1;
            }
            let rel = |estimate: f64| estimate / n as f64 - 1.0;
            lc_sq[j] += rel(counter.count() as f64).powi(2);
            hll_sq[j] += rel(hll.count()).powi(2);
        }
    }
    let rmse = |sq: &[f64]| -> Vec<(f64, f64)> {
        points
            .iter()
            .zip(sq)
            .map(|(&n, s)| (n as f64, 100.0 * (s / COUNTERS as f64).sqrt()))
            .collect()
    };
    let p = Counter::reserve(0.01, LC_CAPACITY, u64::MAX)
        .expect("reserve")
        .geometry()
        .precision;
    let ml = 100.0 * ml_relative_error(p);
    let theory = vec![(100.0, ml), (LC_MAX_N as f64, ml)];
    let hll_theory = vec![(100.0, 104.0 / 128.0), (LC_MAX_N as f64, 104.0 / 128.0)];
    let chart = Chart {
        title: "Relative error vs distinct items: LC.RESERVE key 0.01 50000 (7 KB at most) vs HyperLogLog (12 KB)"
            .to_string(),
        x_label: "distinct items n (log scale)".into(),
        y_label: "relative error, RMSE (%)".into(),
        x: Axis::log(100.0, LC_MAX_N as f64),
        y: Axis::linear(0.0, 1.5, 0.25),
        series: vec![
            Series::line(
                &format!("LC unions (maximum likelihood, 2^{p} registers): {ml:.2}%"),
                "#1f77b4",
                theory,
                true,
            ),
            Series::points(
                &format!("LC.COUNT of one counter, measured ({COUNTERS} counters; exact up to 267)"),
                "#1f77b4",
                rmse(&lc_sq),
            ),
            Series::line("HyperLogLog, theory 1.04/sqrt(16384) = 0.81%", "#d62728", hll_theory, true),
            Series::points(
                &format!("HyperLogLog (Redis's layout and estimator), measured ({COUNTERS})"),
                "#d62728",
                rmse(&hll_sq),
            ),
        ],
        vline: Some((267.0, "exact up to 267".into())),
    };
    let lc_at_capacity = rmse(&lc_sq)
        .into_iter()
        .min_by(|a, b| (a.0 - 50_000.0).abs().total_cmp(&(b.0 - 50_000.0).abs()))
        .unwrap();
    println!(
        "LC RMSE at n = {}: {:.2}%",
        lc_at_capacity.0, lc_at_capacity.1
    );
    chart.svg()
}

// ---- Bloom false positives versus fill ------------------------------------------------------

fn bf_fp_plot() -> String {
    let colors = ["#1f77b4", "#d62728"];
    let mut series = Vec::new();
    for (rate, color) in [0.01, 0.001].into_iter().zip(colors) {
        for expansion in [0u32, 2] {
            let mut chain = Chain::new(rate, BF_CAPACITY, expansion, u64::MAX).expect("chain");
            let mut measured = Vec::new();
            let mut expected = Vec::new();
            let mut added = 0u64;
            let stream = 1 + expansion as u64 * 10 + (rate * 1e4) as u64;
            let steps = 60;
            for step in 0..=steps {
                let fill = 1.5 * step as f64 / steps as f64;
                let target = (fill * BF_CAPACITY as f64).round() as u64;
                let mut full = false;
                while added < target {
                    if chain
                        .add(&hash_item(&item(stream, added)), u64::MAX)
                        .is_err()
                    {
                        full = true;
                        break;
                    }
                    added += 1;
                }
                if full {
                    break;
                }
                let hits = (0..QUERIES)
                    .filter(|q| chain.contains(&hash_item(&item(stream + 1000, *q))))
                    .count();
                // Fewer hits than this are mostly noise (±30% and worse).
                if hits >= 10 {
                    measured.push((fill, hits as f64 / QUERIES as f64));
                }
                // Expected: a lookup misses only if every sub-filter misses.
                let miss: f64 = chain
                    .filters()
                    .iter()
                    .zip(chain.filter_items())
                    .map(|(f, items)| 1.0 - f.expected_fp(*items))
                    .product();
                if fill > 0.0 {
                    expected.push((fill, 1.0 - miss));
                }
            }
            let kind = if expansion == 0 {
                "non-scaling".to_string()
            } else {
                format!("scaling x{expansion}")
            };
            let dashed = expansion != 0;
            let mut theory =
                Series::line(&format!("{rate} {kind}, expected"), color, expected, true);
            theory.dashed = dashed;
            let mut points = Series::points(&format!("{rate} {kind}, measured"), color, measured);
            points.hollow = dashed;
            series.push(theory);
            series.push(points);
        }
        series.push(Series::line(
            &format!("{rate} target"),
            "#888888",
            vec![(0.0, rate), (1.5, rate)],
            false,
        ));
    }
    Chart {
        title: format!(
            "Bloom false-positive rate vs fill (capacity {BF_CAPACITY}, {QUERIES} lookups per point)"
        ),
        x_label: "fill: items added / reserved capacity (non-scaling filters refuse items past 1)"
            .into(),
        y_label: "false-positive rate (log scale)".into(),
        x: Axis::linear(0.0, 1.5, 0.25),
        y: Axis::log(1e-6, 0.1),
        series,
        vline: Some((1.0, "capacity".into())),
    }
    .svg()
}

// ---- A minimal SVG line chart ---------------------------------------------------------------

struct Axis {
    min: f64,
    max: f64,
    log: bool,
    step: f64,
}

impl Axis {
    fn linear(min: f64, max: f64, step: f64) -> Self {
        Axis {
            min,
            max,
            log: false,
            step,
        }
    }

    fn log(min: f64, max: f64) -> Self {
        Axis {
            min,
            max,
            log: true,
            step: 0.0,
        }
    }

    /// Position of `v` in 0..1 (clamped).
    fn frac(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.ln() - self.min.ln()) / (self.max.ln() - self.min.ln())
        } else {
            (v - self.min) / (self.max - self.min)
        };
        // Beyond the axis range: off the plot area, which clips lines and drops points.
        f.clamp(-0.5, 1.5)
    }

    fn ticks(&self) -> Vec<(f64, String)> {
        if self.log {
            let mut ticks = Vec::new();
            let mut decade = 10f64.powf(self.min.log10().floor());
            while decade <= self.max * 1.0001 {
                for mult in [1.0, 2.0, 5.0] {
                    let v = decade * mult;
                    if v >= self.min * 0.9999 && v <= self.max * 1.0001 {
                        ticks.push((v, number(v)));
                    }
                }
                decade *= 10.0;
            }
            ticks
        } else {
            let count = ((self.max - self.min) / self.step).round() as usize;
            (0..=count)
                .map(|i| {
                    let v = self.min + i as f64 * self.step;
                    (v, number(v))
                })
                .collect()
        }
    }
}

fn number(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() < 0.001 {
        format!("{v:.0e}")
    } else if v.abs() >= 1000.0 {
        let thousands = v / 1000.0;
        format!("{}k", (thousands * 10.0).round() / 10.0)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').into()
    }
}

struct Series {
    label: String,
    color: String,
    data: Vec<(f64, f64)>,
    line: bool,
    dashed: bool,
    hollow: bool,
}

impl Series {
    fn line(label: &str, color: &str, data: Vec<(f64, f64)>, solid: bool) -> Self {
        Series {
            label: label.into(),
            color: color.into(),
            data,
            line: true,
            dashed: !solid,
            hollow: false,
        }
    }

    fn points(label: &str, color: &str, data: Vec<(f64, f64)>) -> Self {
        Series {
            label: label.into(),
            color: color.into(),
            data,
            line: false,
            dashed: false,
            hollow: false,
        }
    }
}

struct Chart {
    title: String,
    x_label: String,
    y_label: String,
    x: Axis,
    y: Axis,
    series: Vec<Series>,
    vline: Option<(f64, String)>,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Chart {
    fn svg(&self) -> String {
        let (width, height) = (1040.0, 560.0);
        let (left, right, top, bottom) = (80.0, 400.0, 50.0, 60.0);
        let plot_w = width - left - right;
        let plot_h = height - top - bottom;
        let px = |v: f64| left + self.x.frac(v) * plot_w;
        let py = |v: f64| top + (1.0 - self.y.frac(v)) * plot_h;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<clipPath id="plot"><rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}"/></clipPath>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="24" font-size="14" text-anchor="middle">{}</text>"#,
            width / 2.0,
            escape(&self.title)
        );
        for (v, label) in self.x.ticks() {
            let x = px(v);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
                top + plot_h,
                top + plot_h + 16.0
            );
        }
        for (v, label) in self.y.ticks() {
            let y = py(v);
            let _ = writeln!(
                s,
                r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"##,
                left + plot_w,
                left - 6.0,
                y + 4.0
            );
        }
        let _ = writeln!(
            s,
            r##"<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##
        );
        if let Some((v, label)) = &self.vline {
            let x = px(*v);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#555" stroke-dasharray="2,3"/><text x="{:.1}" y="{:.1}" fill="#555">{label}</text>"##,
                top + plot_h,
                x + 4.0,
                top + 14.0
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            left + plot_w / 2.0,
            height - 18.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(22 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            top + plot_h / 2.0,
            escape(&self.y_label)
        );
        for (i, series) in self.series.iter().enumerate() {
            let dash = if series.dashed {
                r#" stroke-dasharray="6,4""#
            } else {
                ""
            };
            if series.line {
                let path: Vec<String> = series
                    .data
                    .iter()
                    .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                    .collect();
                let _ = writeln!(
                    s,
                    r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="1.8"{dash} clip-path="url(#plot)"/>"#,
                    path.join(" "),
                    series.color
                );
            } else {
                let fill = if series.hollow {
                    "white"
                } else {
                    &series.color
                };
                let inside = |&&(x, y): &&(f64, f64)| {
                    (self.x.min..=self.x.max).contains(&x) && (self.y.min..=self.y.max).contains(&y)
                };
                for &(x, y) in series.data.iter().filter(inside) {
                    let _ = writeln!(
                        s,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{fill}" stroke="{}"/>"#,
                        px(x),
                        py(y),
                        series.color
                    );
                }
            }
            // Legend entry.
            let (lx, ly) = (left + plot_w + 16.0, top + 10.0 + 20.0 * i as f64);
            if series.line {
                let _ = writeln!(
                    s,
                    r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="1.8"{dash}/>"#,
                    lx + 24.0,
                    series.color
                );
            } else {
                let fill = if series.hollow {
                    "white"
                } else {
                    &series.color
                };
                let _ = writeln!(
                    s,
                    r#"<circle cx="{}" cy="{ly}" r="3" fill="{fill}" stroke="{}"/>"#,
                    lx + 12.0,
                    series.color
                );
            }
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" font-size="11">{}</text>"#,
                lx + 30.0,
                ly + 4.0,
                escape(&series.label)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}
