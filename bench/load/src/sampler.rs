//! Reads anteroom's admin API (`GET /rooms/NAME`) every 20 ms during the run.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::AUTHORIZATION;
use hyper::Request;
use serde::Deserialize;
use tokio::sync::watch;

use crate::analysis::Sample;
use crate::browser::HttpClient;

pub const INTERVAL: Duration = Duration::from_millis(20);
const TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Deserialize)]
struct RoomFigures {
    waiting: Option<u64>,
    active: Option<u64>,
    admitted_total: Option<u64>,
}

#[derive(Debug, Default)]
pub struct Samples {
    pub samples: Vec<Sample>,
    pub failures: u64,
    pub last_error: Option<String>,
}

pub struct Sampler {
    pub client: HttpClient,
    pub url: String,
    pub token: Option<String>,
    pub t0: Instant,
}

impl Sampler {
    async fn once(&self) -> Result<Sample, String> {
        let mut req = Request::get(&self.url);
        if let Some(t) = &self.token {
            req = req.header(AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        let sent_us = self.t0.elapsed().as_micros() as u64;
        let fut = async {
            let resp = self.client.request(req).await.map_err(|e| e.to_string())?;
            let status = resp.status();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            if !status.is_success() {
                return Err(format!("HTTP {status}"));
            }
            Ok(body)
        };
        let body = tokio::time::timeout(TIMEOUT, fut)
            .await
            .map_err(|_| "timeout".to_string())??;
        let done_us = self.t0.elapsed().as_micros() as u64;
        let f: RoomFigures = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        Ok(Sample {
            sent_us,
            done_us,
            waiting: f.waiting,
            active: f.active,
            admitted_total: f.admitted_total,
        })
    }

    /// Samples until `stop` turns true. One request at a time, so send times only increase.
    pub async fn run(self, mut stop: watch::Receiver<bool>) -> Samples {
        let mut out = Samples::default();
        let mut tick = tokio::time::interval(INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return out,
            }
            match self.once().await {
                Ok(s) => out.samples.push(s),
                Err(e) => {
                    out.failures += 1;
                    out.last_error = Some(e);
                }
            }
        }
    }
}
