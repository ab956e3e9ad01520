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
/// Visitors told they are in: the discovery curve, which should lie on the admissions.
const DISCOVERED: RGBColor = RGBColor(23, 190, 207);
const QUEUE: RGBColor = RGBColor(31, 119, 180);
const WAITING: RGBColor = RGBColor(127, 127, 127);
const CAPACITY: RGBColor = RGBColor(0, 0, 0);

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
    (m.max(5) as f64) * 1.1
}

/// Axis labels: whole numbers without decimals, others with one.
fn num(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The legend box both panels use: upper right, on a light background.
fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<
        'a,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    Ok(())
}

pub fn write(report: &Report, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let b = &report.timeline.buckets;
    let col =
        |f: fn(&crate::report::Bucket) -> u64| per_second_sum(&b.iter().map(f).collect::<Vec<_>>());
    let arrivals = col(|x| x.arrivals);
    let admissions = col(|x| x.admissions);
    let discovered = col(|x| x.admitted_client);
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
            0f64..y_top(&[
                &arrivals,
                &admissions,
                &discovered,
                &origin,
                &errors,
                &orders,
            ]),
        )?;
    chart
        .configure_mesh()
        .y_desc("per second")
        .x_label_formatter(&num)
        .y_label_formatter(&num)
        .light_line_style(WHITE)
        .draw()?;
    // Arrivals wide and pale underneath: without a waiting room, admissions lie on top of them.
    for (name, data, style) in [
        ("arrivals", &arrivals, ARRIVALS.mix(0.45).stroke_width(7)),
        (admissions_label, &admissions, ADMISSIONS.stroke_width(2)),
        ("told they are in", &discovered, DISCOVERED.stroke_width(2)),
        ("origin requests", &origin, ORIGIN.stroke_width(2)),
        ("origin errors (5xx)", &errors, ERRORS.stroke_width(2)),
        ("orders", &orders, ORDERS.stroke_width(2)),
    ] {
        chart
            .draw_series(LineSeries::new(points(data), style))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    if let Some(c) = &report.capacity {
        // The shop's capacity: what orders per second could be (a drop in the middle).
        let cap: Vec<u64> = c.capacity_per_s.iter().map(|v| v.round() as u64).collect();
        let style = CAPACITY.stroke_width(1);
        chart
            .draw_series(LineSeries::new(points(&cap), style))?
            .label("shop capacity (orders/s)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    legend(&mut chart)?;

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
        .x_label_formatter(&num)
        .y_label_formatter(&num)
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
    legend(&mut chart)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Sample;
    use crate::browser::{Outcome, Record};
    use crate::report::{build, Parameters};
    use crate::sampler::Samples;
    use crate::shop::ShopStats;

    #[test]
    fn writes_a_two_panel_svg_with_a_legend() {
        let records: Vec<Record> = (0..50u64)
            .map(|i| Record {
                arrival: Some(i * 40_000),
                join_sent: Some(i * 40_000),
                join_done: Some(i * 40_000 + 1_000),
                last_waiting_sent: Some(i * 40_000 + 500_000),
                admitted_done: Some(i * 40_000 + 900_000),
                ordered_done: Some(i * 40_000 + 1_200_000),
                outcome: Outcome::Ordered,
                ..Record::default()
            })
            .collect();
        let samples = Samples {
            samples: (0..150u64)
                .map(|i| Sample {
                    sent_us: i * 20_000,
                    done_us: i * 20_000 + 500,
                    waiting: Some(if i < 100 { 10 } else { 0 }),
                    active: Some(3),
                    admitted_total: Some(i / 3),
                })
                .collect(),
            failures: 0,
            last_error: None,
        };
        let shop = ShopStats {
            requests: vec![3; 30],
            orders: vec![1; 30],
            errors: vec![0; 30],
            order_latency_us: vec![200_000; 30],
            max_in_flight: 4,
        };
        let params = Parameters {
            shop_listen: "127.0.0.1:1".into(),
            targets: vec!["http://127.0.0.1:2".into()],
            admin: Some("http://127.0.0.1:3".into()),
            host: None,
            room: "sale".into(),
            visitors: 50,
            arrive_over_s: 2.0,
            curve: crate::arrivals::Curve::Flat,
            workers: 1,
            order_ms: 1,
            shop_queue_timeout_s: 1.0,
            rate: 17.0,
            tick_ms: 100.0,
            deadline_s: 5.0,
            seed: 1,
        };
        let report = build(
            "chart <test> & co",
            params,
            3_200_000,
            &records,
            &shop,
            Some(&samples),
        );
        let path =
            std::env::temp_dir().join(format!("anteroom-load-chart-{}.svg", std::process::id()));
        write(&report, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.contains(r#"width="1000""#) && svg.contains(r#"height="700""#));
        // The title is escaped; every series is in a legend.
        assert!(svg.contains("chart &lt;test&gt; &amp; co"));
        for label in [
            "arrivals",
            "admissions (admin)",
            "told they are in",
            "origin requests",
            "origin errors (5xx)",
            "orders",
            "waiting browsers (client, max per s)",
            "waiting (admin API, max per s)",
        ] {
            assert!(svg.contains(label), "{label}");
        }
        assert!(svg.matches("<polyline").count() >= 7);
        // Arrivals are drawn wide and pale under the other lines.
        assert!(svg.contains(r#"stroke-width="7""#));
    }
}
