//! One SVG: per-second rates on top, the queue below, sharing the time axis.

use std::path::Path;

use plotters::prelude::*;

use crate::analysis::{per_second_max, per_second_sum};
use crate::report::Report;

const ARRIVALS: RGBColor = RGBColor(31, 119, 180);
const ADMISSIONS: RGBColor = RGBColor(44, 160, 44);
const ORIGIN: RGBColor = RGBColor(255, 127, 14);
const ERRORS: RGBColor = RGBColor(214, 39, 40);
const ORDERS: RGBColor = RGBColor(148, 103, 189);
const QUEUE: RGBColor = RGBColor(31, 119, 180);
const WAITING: RGBColor = RGBColor(127, 127, 127);

fn points(v: &[u64]) -> Vec<(f64, f64)> {
    v.iter()
        .enumerate()
        .map(|(i, &y)| (i as f64 + 0.5, y as f64))
        .collect()
}

fn y_top(series: &[&[u64]]) -> f64 {
    let m = series
        .iter()
        .flat_map(|s| s.iter())
        .copied()
        .max()
        .unwrap_or(0);
    (m.max(1) as f64) * 1.1
}

pub fn write(report: &Report, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let b = &report.timeline.buckets;
    let col =
        |f: fn(&crate::report::Bucket) -> u64| per_second_sum(&b.iter().map(f).collect::<Vec<_>>());
    let arrivals = col(|x| x.arrivals);
    let admissions = col(|x| x.admissions);
    let origin = col(|x| x.origin_requests);
    let errors = col(|x| x.origin_errors);
    let orders = col(|x| x.orders);
    let queue: Vec<u64> = per_second_max(&b.iter().map(|x| Some(x.queue)).collect::<Vec<_>>())
        .into_iter()
        .map(|v| v.unwrap_or(0))
        .collect();
    let waiting_admin = per_second_max(&b.iter().map(|x| x.waiting_admin).collect::<Vec<_>>());
    let have_admin = waiting_admin.iter().any(|v| v.is_some());
    let waiting: Vec<u64> = waiting_admin.iter().map(|v| v.unwrap_or(0)).collect();
    let x_max = (arrivals.len().max(1)) as f64;

    let root = SVGBackend::new(path, (1000, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(&report.label, ("sans-serif", 24))?;
    let (top, bottom) = root.split_vertically(400);

    let admissions_label = if report.timeline.admissions_source == "admin" {
        "admissions (admin)"
    } else {
        "admissions (client)"
    };
    let mut chart = ChartBuilder::on(&top)
        .margin(10)
        .x_label_area_size(25)
        .y_label_area_size(60)
        .build_cartesian_2d(
            0f64..x_max,
            0f64..y_top(&[&arrivals, &admissions, &origin, &errors, &orders]),
        )?;
    chart
        .configure_mesh()
        .y_desc("per second")
        .light_line_style(WHITE)
        .draw()?;
    for (name, data, color) in [
        ("arrivals", &arrivals, ARRIVALS),
        (admissions_label, &admissions, ADMISSIONS),
        ("origin requests", &origin, ORIGIN),
        ("origin errors (5xx)", &errors, ERRORS),
        ("orders", &orders, ORDERS),
    ] {
        chart
            .draw_series(LineSeries::new(points(data), color.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;

    let queue_top = if have_admin {
        y_top(&[&queue, &waiting])
    } else {
        y_top(&[&queue])
    };
    let mut chart = ChartBuilder::on(&bottom)
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, 0f64..queue_top)?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc("queue length")
        .light_line_style(WHITE)
        .draw()?;
    chart
        .draw_series(LineSeries::new(points(&queue), QUEUE.stroke_width(2)))?
        .label("waiting browsers (client, max per s)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], QUEUE.stroke_width(2)));
    if have_admin {
        chart
            .draw_series(LineSeries::new(points(&waiting), WAITING.stroke_width(2)))?
            .label("waiting (admin API, max per s)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], WAITING.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}
