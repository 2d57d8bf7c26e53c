//! Plots as SVG and PNG: thread-scaling lines (one line per target, or per
//! target and variant) and grouped bars (per preset variant, per fio job).
//!
//! Both files come from the same drawing code: plotters' SVG backend, and its
//! bitmap backend rendering into a buffer that the `png` crate encodes. Text is
//! drawn with a TrueType font loaded at run time (DejaVu Sans or another common
//! sans font; `CACHALOT_BENCH_FONT` overrides), so no system font libraries are
//! linked.
//!
//! Invariants:
//! - [`init_font`] succeeds before any drawing (studies call it before starting
//!   anything, so a missing font is a clear up-front error).
//! - A chart is written as `BASE.svg` and `BASE.png`, both or an error.
//! - Values that were not measured (None) are left out, never drawn as zero.

use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const W: u32 = 960;
const H: u32 = 560;
const FONT: &str = "sans-serif";

/// Colours that stay apart on screen and paper (the "tab10" palette).
const COLORS: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

fn color(i: usize) -> RGBColor {
    let (r, g, b) = COLORS[i % COLORS.len()];
    RGBColor(r, g, b)
}

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
];

/// The font file plots will use.
pub fn find_font() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("CACHALOT_BENCH_FONT").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("CACHALOT_BENCH_FONT={} is not a file", p.display());
        }
        return Ok(p);
    }
    FONT_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            anyhow!("no TrueType font for the plots (apt-get install fonts-dejavu-core, or set CACHALOT_BENCH_FONT)")
        })
}

static FONT_INIT: OnceLock<Result<(), String>> = OnceLock::new();

/// Load and register the plot font once per process.
pub fn init_font() -> Result<()> {
    FONT_INIT
        .get_or_init(|| {
            let p = find_font().map_err(|e| e.to_string())?;
            let bytes =
                std::fs::read(&p).map_err(|e| format!("cannot read font {}: {e}", p.display()))?;
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font(FONT, FontStyle::Normal, bytes)
                .map_err(|_| format!("{} is not a usable TrueType font", p.display()))
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

/// One line of a line chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// One group of bars: a value per category (None: not measured).
#[derive(Debug, Clone)]
pub struct BarSeries {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// What to draw.
#[derive(Debug, Clone)]
pub enum Chart {
    /// Lines over a log2 x axis with ticks at `x_ticks` (thread counts).
    Lines {
        title: String,
        x_label: String,
        y_label: String,
        x_ticks: Vec<f64>,
        series: Vec<Series>,
    },
    /// Grouped bars: one group per category, one bar per series.
    Bars {
        title: String,
        y_label: String,
        categories: Vec<String>,
        series: Vec<BarSeries>,
    },
}

/// Compact axis numbers: 950, 1.2k, 35k, 1.5M.
fn axis_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn y_max(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.fold(0.0f64, f64::max);
    if m > 0.0 {
        m * 1.15
    } else {
        1.0
    }
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    match chart {
        Chart::Lines {
            title,
            x_label,
            y_label,
            x_ticks,
            series,
        } => {
            let lo = x_ticks
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min)
                .max(0.5);
            let hi = x_ticks.iter().copied().fold(1.0, f64::max);
            let ymax = y_max(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
            let mut c = ChartBuilder::on(&root)
                .caption(title, (FONT, 22))
                .margin(16)
                .x_label_area_size(48)
                .y_label_area_size(72)
                .build_cartesian_2d(
                    (lo / 1.3..hi * 1.3)
                        .log_scale()
                        .with_key_points(x_ticks.clone()),
                    0f64..ymax,
                )
                .map_err(e)?;
            c.configure_mesh()
                .x_desc(x_label.as_str())
                .y_desc(y_label.as_str())
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| axis_num(*y))
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 16))
                .light_line_style(RGBColor(244, 244, 244))
                .draw()
                .map_err(e)?;
            for (i, s) in series.iter().enumerate() {
                let col = color(i);
                c.draw_series(LineSeries::new(s.points.clone(), col.stroke_width(2)))
                    .map_err(e)?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 22, y)], col.stroke_width(3))
                    });
                c.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, col.filled())))
                    .map_err(e)?;
            }
            c.configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .label_font((FONT, 14))
                .draw()
                .map_err(e)?;
        }
        Chart::Bars {
            title,
            y_label,
            categories,
            series,
        } => {
            let n = categories.len().max(1) as f64;
            let ymax = y_max(
                series
                    .iter()
                    .flat_map(|s| s.values.iter().flatten().copied()),
            );
            let mut c = ChartBuilder::on(&root)
                .caption(title, (FONT, 22))
                .margin(16)
                .x_label_area_size(48)
                .y_label_area_size(72)
                .build_cartesian_2d(0f64..n, 0f64..ymax)
                .map_err(e)?;
            let cats = categories.clone();
            // Key points every 0.5 (2n+1 of them): the half-way ones, the group
            // centres, carry the category names; the others stay blank.
            c.configure_mesh()
                .disable_x_mesh()
                .x_labels(categories.len() * 2 + 1)
                .y_desc(y_label.as_str())
                .x_label_formatter(&|x| {
                    if (x.fract() - 0.5).abs() < 1e-6 {
                        cats.get(x.floor() as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|y| axis_num(*y))
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 16))
                .light_line_style(RGBColor(244, 244, 244))
                .draw()
                .map_err(e)?;
            let ns = series.len().max(1) as f64;
            let width = 0.8 / ns;
            let value_style =
                TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
            for (si, s) in series.iter().enumerate() {
                let col = color(si);
                let bars = s.values.iter().enumerate().filter_map(|(ci, v)| {
                    v.map(|v| {
                        let x0 = ci as f64 + 0.1 + si as f64 * width;
                        Rectangle::new([(x0, 0.0), (x0 + width * 0.92, v)], col.filled())
                    })
                });
                c.draw_series(bars)
                    .map_err(e)?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 14, y + 6)], col.filled())
                    });
                let labels = s.values.iter().enumerate().filter_map(|(ci, v)| {
                    v.map(|v| {
                        let xc = ci as f64 + 0.1 + (si as f64 + 0.46) * width;
                        Text::new(crate::report::fmt_rate(v), (xc, v), value_style.clone())
                    })
                });
                c.draw_series(labels).map_err(e)?;
            }
            c.configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .label_font((FONT, 14))
                .draw()
                .map_err(e)?;
        }
    }
    root.present().map_err(e)
}

/// Write `chart` as `dir/BASE.svg` and `dir/BASE.png`.
pub fn render(dir: &Path, base: &str, chart: &Chart) -> Result<()> {
    init_font()?;
    let svg = dir.join(format!("{base}.svg"));
    draw(SVGBackend::new(&svg, (W, H)).into_drawing_area(), chart)
        .map_err(|e| anyhow!("drawing {}: {e}", svg.display()))?;

    let png_path = dir.join(format!("{base}.png"));
    let mut buf = vec![0u8; (W * H * 3) as usize];
    draw(
        BitMapBackend::with_buffer(&mut buf, (W, H)).into_drawing_area(),
        chart,
    )
    .map_err(|e| anyhow!("drawing {}: {e}", png_path.display()))?;
    write_png(&png_path, &buf, W, H)
}

fn write_png(path: &Path, rgb: &[u8], w: u32, h: u32) -> Result<()> {
    let f =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(f), w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut wr = enc
        .write_header()
        .with_context(|| format!("writing {}", path.display()))?;
    wr.write_image_data(rgb)
        .with_context(|| format!("writing {}", path.display()))?;
    wr.finish()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_numbers() {
        assert_eq!(axis_num(950.0), "950");
        assert_eq!(axis_num(1234.0), "1.2k");
        assert_eq!(axis_num(35_000.0), "35k");
        assert_eq!(axis_num(1_500_000.0), "1.5M");
        assert_eq!(axis_num(2.5), "2.5");
    }

    #[test]
    fn renders_lines_and_bars_to_svg_and_png() {
        if find_font().is_err() {
            eprintln!("skipped: no font installed");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let lines = Chart::Lines {
            title: "TPS by threads".into(),
            x_label: "threads".into(),
            y_label: "TPS".into(),
            x_ticks: vec![1.0, 4.0, 16.0, 64.0],
            series: vec![
                Series {
                    name: "ext4".into(),
                    points: vec![(1.0, 396.0), (4.0, 831.0), (16.0, 949.0), (64.0, 992.0)],
                },
                Series {
                    name: "xfs".into(),
                    points: vec![(1.0, 429.0), (4.0, 774.0), (16.0, 956.0), (64.0, 979.0)],
                },
            ],
        };
        render(d.path(), "lines", &lines).unwrap();
        let bars = Chart::Bars {
            title: "TPS at 16 threads".into(),
            y_label: "TPS".into(),
            categories: vec!["fsync".into(), "O_DSYNC".into(), "O_DIRECT".into()],
            series: vec![
                BarSeries {
                    name: "ext4".into(),
                    values: vec![Some(1243.0), Some(1001.0), Some(1019.0)],
                },
                BarSeries {
                    name: "xfs".into(),
                    values: vec![Some(1111.0), None, Some(953.0)],
                },
            ],
        };
        render(d.path(), "bars", &bars).unwrap();
        for f in ["lines.svg", "lines.png", "bars.svg", "bars.png"] {
            let p = d.path().join(f);
            assert!(std::fs::metadata(&p).unwrap().len() > 1000, "{f} too small");
        }
        let svg = std::fs::read_to_string(d.path().join("lines.svg")).unwrap();
        assert!(svg.contains("ext4") && svg.contains("TPS by threads"));
        let png = std::fs::read(d.path().join("bars.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }
}
