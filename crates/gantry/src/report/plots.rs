//! The report's plots, as SVG: lines over cluster time (with the scenario's events marked)
//! or wall time, and bar charts. Axes count in whole units; numbers carry thousands
//! separators.

use std::path::Path;

use gantry_sim::scenario::Mark;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Points of one line.
pub type Series = Vec<(f64, f64)>;

/// At most this many points per line: a day-long run samples every second.
const MAX_POINTS: usize = 2000;

const SIZE: (u32, u32) = (900, 420);
const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];
const MARK_COLOUR: RGBColor = RGBColor(120, 120, 120);
const CAPTION: (&str, u32) = ("sans-serif", 22);
const LABELS: (&str, u32) = ("sans-serif", 16);

/// How the y axis reads.
#[derive(Clone, Copy)]
pub enum YAxis {
    /// A count of things: whole numbers.
    Count,
    /// A share, plotted in percent.
    Percent,
}

/// A line plot over time. `marks` are drawn as numbered vertical lines (the numbers are
/// the page's event list's).
pub struct LinePlot<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub y_axis: YAxis,
    pub series: &'a [(&'a str, Series)],
    pub marks: &'a [Mark],
    /// Divides seconds into the x axis' unit (1, 60 or 3600).
    pub x_unit: f64,
}

impl LinePlot<'_> {
    pub fn draw(&self, path: &Path) -> anyhow::Result<()> {
        let points = self.series.iter().flat_map(|(_, s)| s.iter());
        let x_max = points.clone().map(|p| p.0).fold(0.0, f64::max);
        let x_max = self
            .marks
            .iter()
            .map(|m| m.at.as_secs_f64() / self.x_unit)
            .fold(x_max, f64::max)
            .max(1.0);
        let y_max = points.map(|p| p.1).fold(0.0, f64::max);
        let y_max = match self.y_axis {
            // Five or more, so that the ticks fall on whole numbers.
            YAxis::Count => (y_max * 1.05).max(5.0),
            YAxis::Percent => (y_max * 1.05).max(100.0),
        };
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart =
            builder(&root, self.title).build_cartesian_2d(0.0..x_max * 1.02, 0.0..y_max * 1.08)?;
        let y_axis = self.y_axis;
        chart
            .configure_mesh()
            .x_desc(self.x_desc)
            .y_desc(self.y_desc)
            .label_style(LABELS)
            .axis_desc_style(LABELS)
            .x_labels(8)
            .y_labels(6)
            .x_label_formatter(&|v| number(*v))
            .y_label_formatter(&|v| match y_axis {
                YAxis::Count => number(*v),
                YAxis::Percent => format!("{}%", number(*v)),
            })
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for (i, mark) in self.marks.iter().enumerate() {
            let x = mark.at.as_secs_f64() / self.x_unit;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.0), (x, y_max)],
                MARK_COLOUR.stroke_width(1),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                (i + 1).to_string(),
                (x, y_max * 1.07),
                ("sans-serif", 17)
                    .into_font()
                    .style(FontStyle::Bold)
                    .color(&MARK_COLOUR)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            )))?;
        }
        for (i, (label, data)) in self.series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(
                    steps(&thin_out(data)),
                    colour.stroke_width(2),
                ))?
                .label(*label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
        }
        if self.series.len() > 1 {
            legend(&mut chart)?;
        }
        root.present()?;
        Ok(())
    }
}

/// Bars side by side per category, one colour per series (e.g. nodes per utilisation
/// bucket, for cpu and memory). Category `i` is centred on `x = i`.
pub struct BarPlot<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub categories: &'a [String],
    pub series: &'a [(&'a str, Vec<u64>)],
}

impl BarPlot<'_> {
    pub fn draw(&self, path: &Path) -> anyhow::Result<()> {
        let highest = self
            .series
            .iter()
            .flat_map(|(_, counts)| counts.iter().copied())
            .max()
            .unwrap_or(0);
        let y_max = (highest as f64 * 1.05).max(5.0);
        let n = self.categories.len();
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart =
            builder(&root, self.title).build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..y_max)?;
        let categories = self.categories;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(self.x_desc)
            .y_desc(self.y_desc)
            .label_style(LABELS)
            .axis_desc_style(LABELS)
            .x_labels(n + 1)
            .y_labels(6)
            .x_label_formatter(&|v| {
                let i = v.round();
                if (v - i).abs() > 1e-6 || i < 0.0 {
                    return String::new();
                }
                categories.get(i as usize).cloned().unwrap_or_default()
            })
            .y_label_formatter(&|v| number(*v))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        let slots = self.series.len().max(1) as f64;
        let width = 0.8 / slots;
        for (s, (label, counts)) in self.series.iter().enumerate() {
            let colour = COLOURS[s % COLOURS.len()];
            let left = |i: usize| i as f64 - 0.4 + s as f64 * width;
            chart
                .draw_series(counts.iter().enumerate().map(|(i, c)| {
                    Rectangle::new(
                        [(left(i) + 0.02, 0.0), (left(i) + width - 0.02, *c as f64)],
                        colour.filled(),
                    )
                }))?
                .label(*label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
        }
        if self.series.len() > 1 {
            legend(&mut chart)?;
        }
        root.present()?;
        Ok(())
    }
}

/// A chart with the plots' title style, margins and room for the axis labels.
fn builder<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, CAPTION)
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(75);
    builder
}

/// The series' names and colours, in the upper left corner.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(LABELS)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .draw()
}

/// At most `MAX_POINTS` of the points, evenly spaced, the last one kept.
fn thin_out(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let step = points.len().div_ceil(MAX_POINTS).max(1);
    let mut kept: Vec<(f64, f64)> = points.iter().step_by(step).copied().collect();
    if let Some(last) = points.last()
        && kept.last() != Some(last)
    {
        kept.push(*last);
    }
    kept
}

/// A line that holds each value until the next point's time, as samples do.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(x, y)) in points.iter().enumerate() {
        if i > 0 {
            out.push((x, points[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

/// `12,345`, `0.5`, `2.25`: whole numbers with separators, fractions as they are.
pub fn number(v: f64) -> String {
    if v.fract().abs() < 1e-9 {
        thousands(v.round() as i64)
    } else {
        let text = format!("{v:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// `1,234,567`.
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_a_person_writes_them() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(16919.0), "16,919");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(thousands(-1_234_567), "-1,234,567");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn long_lines_are_thinned_keeping_the_last_point() {
        let points: Vec<(f64, f64)> = (0..10_001).map(|i| (i as f64, 0.0)).collect();
        let kept = thin_out(&points);
        assert!(kept.len() <= MAX_POINTS + 1);
        assert_eq!(kept.last(), points.last());
        assert_eq!(thin_out(&points[..3]).len(), 3);
    }

    #[test]
    fn a_value_holds_until_the_next_sample() {
        assert_eq!(
            steps(&[(0.0, 1.0), (2.0, 5.0), (3.0, 4.0)]),
            [(0.0, 1.0), (2.0, 1.0), (2.0, 5.0), (3.0, 5.0), (3.0, 4.0)]
        );
    }
}
