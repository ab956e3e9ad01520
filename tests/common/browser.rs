//! Headless Chromium over WebDriver (chromedriver), for the tests of what a visitor or an
//! operator sees. Screenshots land in `target/screenshots/`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

use super::{eventually, free_port};

/// A chromedriver process on a free port, killed on drop.
pub struct Driver {
    child: Child,
    base: String,
    _profiles: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Browser {
    session: String,
    http: reqwest::Client,
}

impl Driver {
    /// A chromedriver on a free port, ready. One that exits before it is ready (the port taken
    /// between `free_port` and its bind, by another test's process) is started again on
    /// another port (found by a CI rehearsal: "timed out waiting for: chromedriver to be
    /// ready", the process long gone).
    pub async fn start() -> Driver {
        for _ in 0..3 {
            let port = free_port();
            let child = Command::new("chromedriver")
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("chromedriver must be installed (scripts/test installs chromium-driver)");
            let mut driver = Driver {
                child,
                base: format!("http://127.0.0.1:{port}"),
                _profiles: tempfile::tempdir().unwrap(),
            };
            let status = format!("{}/status", driver.base);
            let ready = eventually(Duration::from_secs(30), "chromedriver to be ready", || {
                let url = status.clone();
                let exited = driver.child.try_wait().ok().flatten().is_some();
                async move {
                    if exited {
                        return Some(false);
                    }
                    let v: Value = reqwest::get(url).await.ok()?.json().await.ok()?;
                    (v["value"]["ready"] == true).then_some(true)
                }
            })
            .await;
            if ready {
                return driver;
            }
        }
        panic!("chromedriver exited before it was ready, three times");
    }

    pub async fn browser(
        &self,
        width: u32,
        height: u32,
        javascript: bool,
        languages: &str,
    ) -> Browser {
        self.browser_with(width, height, javascript, languages, &[])
            .await
    }

    /// A browser with more command-line switches (host mapping, a certificate to trust).
    pub async fn browser_with(
        &self,
        width: u32,
        height: u32,
        javascript: bool,
        languages: &str,
        extra: &[String],
    ) -> Browser {
        self.browser_prefs(width, height, javascript, languages, extra, &[])
            .await
    }

    /// A browser that blocks every site's cookies, as "Block all cookies" in its settings.
    pub async fn browser_refusing_cookies(&self, javascript: bool) -> Browser {
        let block = ("profile.default_content_setting_values.cookies", json!(2));
        self.browser_prefs(1280, 900, javascript, "en-US,en", &[], &[block])
            .await
    }

    async fn browser_prefs(
        &self,
        width: u32,
        height: u32,
        javascript: bool,
        languages: &str,
        extra: &[String],
        more_prefs: &[(&str, Value)],
    ) -> Browser {
        let profile = self._profiles.path().join(format!("p{}", free_port()));
        let mut prefs = json!({ "intl.accept_languages": languages });
        if !javascript {
            prefs["profile.managed_default_content_settings.javascript"] = json!(2);
        }
        for (k, v) in more_prefs {
            prefs[*k] = v.clone();
        }
        let mut args: Vec<String> = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-dev-shm-usage",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        args.push(format!("--window-size={width},{height}"));
        args.push(format!("--user-data-dir={}", profile.display()));
        args.extend(extra.iter().cloned());
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": { "browser": "ALL" },
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": args,
                "prefs": prefs,
            }
        }}});
        let http = reqwest::Client::new();
        let v: Value = http
            .post(format!("{}/session", self.base))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        Browser {
            session: format!("{}/session/{id}", self.base),
            http,
        }
    }
}

impl Browser {
    pub async fn cmd(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.session));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req.send().await.unwrap().json().await.unwrap();
        v["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.cmd(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    pub async fn url(&self) -> String {
        self.cmd(reqwest::Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    pub async fn run(&self, script: &str) -> Value {
        self.cmd(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
        .await
    }

    /// Waits (10 s at most) until the page shows its note that the browser refuses cookies.
    pub async fn cookies_note_shown(&self) {
        let shown = "var e = document.getElementById('cookies-note'); return !!e && !e.hidden";
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.run(shown).await != true {
            assert!(
                std::time::Instant::now() < deadline,
                "the page says cookies are refused: {}",
                self.text().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn text(&self) -> String {
        self.run("return document.body ? document.body.innerText : ''")
            .await
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let b64 = self.cmd(reqwest::Method::GET, "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or(""))
            .unwrap();
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, png).unwrap();
        path
    }

    pub async fn severe_logs(&self) -> Vec<Value> {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/se/log",
                Some(json!({ "type": "browser" })),
            )
            .await;
        // An error object here would make "no errors" meaningless: insist on the log itself.
        let entries = v
            .as_array()
            .unwrap_or_else(|| panic!("no browser log: {v}"));
        entries
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .cloned()
            .collect()
    }

    /// A phone's screen: `width` x `height` CSS pixels, as a mobile viewport. (A headless
    /// window is never narrower than 500 px: `--window-size` alone does not make a phone.)
    pub async fn phone_screen(&self, width: u32, height: u32) {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/goog/cdp/execute",
                Some(json!({
                    "cmd": "Emulation.setDeviceMetricsOverride",
                    "params": {
                        "width": width,
                        "height": height,
                        "deviceScaleFactor": 1,
                        "mobile": true,
                    }
                })),
            )
            .await;
        assert!(v.get("error").is_none(), "no phone screen: {v}");
    }

    pub async fn close(&self) {
        let _ = self.http.delete(&self.session).send().await;
    }
}
