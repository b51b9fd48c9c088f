//! Headless Chromium for the dashboard test: the Debian `chromium` started
//! with the DevTools protocol on a port of its choosing and a profile of its
//! own, driven over one WebSocket (commands answered by id, events kept as
//! they arrive), and killed with its whole process group when dropped.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How long one DevTools command may take, and the browser to start.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);
const START_WITHIN: Duration = Duration::from_secs(60);

/// The browser process (and its group): killed on drop.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        // The group holds the browser and its renderer, GPU and utility
        // processes (spawned with process_group(0): its id is the browser's).
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub struct Chromium {
    socket: Socket,
    next_id: u64,
    /// Every event received so far, as sent (`method`, `params`, `sessionId`).
    pub events: Vec<Value>,
    process: Process,
}

/// `chromium` on the PATH (Debian installs `/usr/bin/chromium`).
fn binary() -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
        .context(
            "Chromium is not installed (no `chromium` on the PATH nor /usr/bin/chromium): \
             the dashboard test needs the Debian package `chromium` (`apt-get install chromium`; \
             scripts/lib.sh ensure_packages installs it)",
        )
}

impl Chromium {
    /// Starts headless Chromium with its profile in `profile` and connects
    /// to its DevTools endpoint.
    pub async fn launch(profile: &Path) -> Result<Self> {
        let mut child = Command::new(binary()?)
            .args([
                "--headless=new",
                "--remote-debugging-port=0",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-default-apps",
                "--hide-scrollbars",
                "--window-size=1280,1000",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .context("starting chromium")?;
        let stderr = child.stderr.take().context("no stderr pipe")?;
        let process = Process(child);
        // Chromium says where DevTools listens on stderr; the rest of its
        // stderr is read (and kept for an error message) until it exits.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                // Once nobody listens, lines are only drained (so Chromium
                // never blocks on a full pipe).
                let _ = tx.send(line);
            }
        });
        let mut said = Vec::new();
        let url = tokio::time::timeout(START_WITHIN, async {
            while let Some(line) = rx.recv().await {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    return Some(url.trim().to_owned());
                }
                said.push(line);
            }
            None
        })
        .await
        .ok()
        .flatten();
        let Some(url) = url else {
            bail!(
                "chromium did not say where DevTools listens; its stderr:\n{}",
                said.join("\n")
            );
        };
        let (socket, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .with_context(|| format!("connecting to DevTools at {url}"))?;
        Ok(Self {
            socket,
            next_id: 0,
            events: Vec::new(),
            process,
        })
    }

    /// Sends `method` (to the page `session`, or to the browser) and returns
    /// its result; events that arrive meanwhile are kept in `events`.
    pub async fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            message["sessionId"] = json!(s);
        }
        self.socket.send(Message::Text(message.to_string().into())).await?;
        let answer = tokio::time::timeout(ANSWER_WITHIN, async {
            loop {
                let frame = self.socket.next().await.context("the DevTools socket closed")??;
                let Message::Text(text) = frame else { continue };
                let v: Value = serde_json::from_str(text.as_str())?;
                if v.get("id").and_then(Value::as_u64) == Some(id) {
                    return anyhow::Ok(v);
                }
                if v.get("method").is_some() {
                    self.events.push(v);
                }
            }
        })
        .await
        .with_context(|| format!("{method}: no answer within {ANSWER_WITHIN:?}"))??;
        if let Some(e) = answer.get("error") {
            bail!("{method}: {e}");
        }
        Ok(answer.get("result").cloned().unwrap_or(Value::Null))
    }

    /// A new tab, attached (flat session), with the network, page, runtime
    /// and log domains on and a `width`×`height` viewport; its session id.
    pub async fn new_page(&mut self, width: u32, height: u32) -> Result<String> {
        let target = self
            .call(None, "Target.createTarget", json!({ "url": "about:blank" }))
            .await?;
        let target = target["targetId"].as_str().context("no targetId")?.to_owned();
        let attached = self
            .call(
                None,
                "Target.attachToTarget",
                json!({ "targetId": target, "flatten": true }),
            )
            .await?;
        let session = attached["sessionId"].as_str().context("no sessionId")?.to_owned();
        for domain in ["Network.enable", "Page.enable", "Runtime.enable", "Log.enable"] {
            self.call(Some(&session), domain, json!({})).await?;
        }
        self.resize(&session, width, height).await?;
        Ok(session)
    }

    pub async fn resize(&mut self, session: &str, width: u32, height: u32) -> Result<()> {
        self.call(
            Some(session),
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false }),
        )
        .await?;
        Ok(())
    }

    pub async fn navigate(&mut self, session: &str, url: &str) -> Result<()> {
        let r = self.call(Some(session), "Page.navigate", json!({ "url": url })).await?;
        if let Some(e) = r.get("errorText").and_then(Value::as_str) {
            bail!("navigating to {url}: {e}");
        }
        Ok(())
    }

    /// The value of a JavaScript expression in the page (awaited, by value).
    pub async fn evaluate(&mut self, session: &str, expression: &str) -> Result<Value> {
        let r = self
            .call(
                Some(session),
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
            )
            .await?;
        if let Some(e) = r.get("exceptionDetails") {
            bail!("{expression}: {e}");
        }
        Ok(r["result"]["value"].clone())
    }

    /// The page as a PNG.
    pub async fn screenshot(&mut self, session: &str) -> Result<Vec<u8>> {
        let r = self
            .call(Some(session), "Page.captureScreenshot", json!({ "format": "png" }))
            .await?;
        let data = r["data"].as_str().context("no screenshot data")?;
        Ok(base64::engine::general_purpose::STANDARD.decode(data)?)
    }

    /// The events of `method` sent for `session`.
    pub fn events_of<'a>(&'a self, session: &'a str, method: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.events
            .iter()
            .filter(move |e| e["method"] == method && e["sessionId"] == session)
    }

    /// Asks the browser to close, gives it a moment, then kills what is left.
    pub async fn close(mut self) {
        let _ = self.call(None, "Browser.close", json!({})).await;
        for _ in 0..50 {
            if matches!(self.process.0.try_wait(), Ok(Some(_))) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        drop(self);
    }
}
