//! The latency-percentile plot as a self-contained SVG: x is the percentile on the
//! usual "nines" scale (log of 1 / (1 − p)), y is latency in µs on a log scale.

use std::fmt::Write as _;

use crate::stats::LatencySummary;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 50.0;
/// Where 100 % sits on the nines axis (one past 99.999 %).
const MAX_NINES: f64 = 6.0;
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];

fn nines(percentile: f64) -> f64 {
    let rest = 1.0 - percentile / 100.0;
    if rest <= 0.0 {
        MAX_NINES
    } else {
        (-rest.log10()).min(MAX_NINES)
    }
}

/// Renders one line per series.
pub(crate) fn latency_svg(title: &str, series: &[(String, LatencySummary)]) -> String {
    let values = series
        .iter()
        .flat_map(|(_, s)| s.curve.iter().map(|(_, us)| *us))
        .filter(|us| *us > 0.0);
    let (low, high) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (log_low, log_high) = if low <= high {
        (
            low.log10().floor(),
            high.log10().ceil().max(low.log10().floor() + 1.0),
        )
    } else {
        (0.0, 1.0)
    };
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |p: f64| LEFT + nines(p) / MAX_NINES * plot_w;
    let y = |us: f64| {
        let l = us.max(10f64.powf(log_low)).log10();
        TOP + plot_h - (l - log_low) / (log_high - log_low) * plot_h
    };
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="14">{}</text>"#,
        LEFT + plot_w / 2.0,
        escape(title)
    );
    for (label, p) in [
        ("0", 0.0),
        ("90", 90.0),
        ("99", 99.0),
        ("99.9", 99.9),
        ("99.99", 99.99),
        ("99.999", 99.999),
        ("max", 100.0),
    ] {
        let px = x(p);
        let _ = writeln!(
            svg,
            r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 16.0
        );
    }
    let mut decade = log_low;
    while decade <= log_high {
        let us = 10f64.powf(decade);
        let py = y(us);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            py + 4.0,
            microseconds_label(us)
        );
        decade += 1.0;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 10.0
    );
    for (index, (label, summary)) in series.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        let points: Vec<String> = summary
            .curve
            .iter()
            .map(|(p, us)| format!("{:.1},{:.1}", x(*p), y(*us)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            points.join(" ")
        );
        let ly = TOP + 10.0 + index as f64 * 18.0;
        let lx = LEFT + plot_w + 12.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 18.0,
            lx + 24.0,
            ly + 4.0,
            escape(label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn microseconds_label(us: f64) -> String {
    if us >= 1e6 {
        format!("{} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{} ms", us / 1e3)
    } else {
        format!("{us} µs")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Latencies;
    use std::time::Duration;

    #[test]
    fn plots_one_polyline_per_series_with_escaped_labels() {
        let mut h = Latencies::new();
        for us in 1..=10_000u64 {
            h.record(Duration::from_micros(us));
        }
        let series = vec![
            ("ping <1 in flight>".to_string(), h.summary()),
            ("e2e".to_string(), h.summary()),
        ];
        let svg = latency_svg("latency & percentiles", &series);
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("ping &lt;1 in flight&gt;"));
        assert!(svg.contains("latency &amp; percentiles"));
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn nines_axis() {
        assert_eq!(nines(0.0), 0.0);
        assert!((nines(99.0) - 2.0).abs() < 1e-9);
        assert_eq!(nines(100.0), MAX_NINES);
    }
}
