//! When each browser arrives: a deterministic draw (by seed) from the chosen curve.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Curve {
    /// Arrival density rising linearly from zero over the window.
    Ramp,
    /// Uniform over the window.
    Flat,
    /// Half the visitors in the first 10% of the window, the rest uniform over the other 90%.
    Spike,
}

/// Arrival offsets (from the run start) of `n` visitors over `window`, in visitor order.
pub fn arrivals(curve: Curve, n: usize, window: Duration, seed: u64) -> Vec<Duration> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let w = window.as_secs_f64();
    let spike = n / 2;
    (0..n)
        .map(|i| {
            let u = rng.f64();
            let frac = match curve {
                // Density ∝ t: CDF (t/W)², so t = W·√u.
                Curve::Ramp => u.sqrt(),
                Curve::Flat => u,
                Curve::Spike if i < spike => 0.1 * u,
                Curve::Spike => 0.1 + 0.9 * u,
            };
            Duration::from_secs_f64(w * frac)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share_before(v: &[Duration], t: f64) -> f64 {
        v.iter().filter(|d| d.as_secs_f64() < t).count() as f64 / v.len() as f64
    }

    #[test]
    fn curves_have_their_shape() {
        let w = Duration::from_secs(10);
        let n = 20_000;
        let ramp = arrivals(Curve::Ramp, n, w, 1);
        assert!(ramp.iter().all(|d| *d < w));
        // (1/2)² = 25% in the first half, (1/10)² = 1% in the first tenth.
        assert!((share_before(&ramp, 5.0) - 0.25).abs() < 0.02);
        assert!((share_before(&ramp, 1.0) - 0.01).abs() < 0.005);

        let flat = arrivals(Curve::Flat, n, w, 1);
        assert!((share_before(&flat, 5.0) - 0.5).abs() < 0.02);

        let spike = arrivals(Curve::Spike, n, w, 1);
        assert_eq!(share_before(&spike, 1.0), 0.5);
        assert!((share_before(&spike, 5.5) - 0.75).abs() < 0.02);
        assert!(spike.iter().all(|d| *d < w));
    }

    #[test]
    fn the_same_seed_gives_the_same_arrivals() {
        let w = Duration::from_secs(3);
        assert_eq!(
            arrivals(Curve::Ramp, 100, w, 9),
            arrivals(Curve::Ramp, 100, w, 9)
        );
        assert_ne!(
            arrivals(Curve::Ramp, 100, w, 9),
            arrivals(Curve::Ramp, 100, w, 10)
        );
    }
}
