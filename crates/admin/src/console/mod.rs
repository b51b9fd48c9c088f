//! The console's commands carried out over every engine's core: the
//! [`gatehouse_core::console::Commands`] the app gives both cores, so a console
//! session on either engine's endpoint sees and acts on the whole proxy
//! (`SHOW POOLS` lists PostgreSQL's and MySQL's pools). The tables are
//! built in [`tables`]; the operator commands here use the same
//! operations as the admin HTTP API.

mod tables;

use std::sync::Arc;

use crate::process::{Listeners, Reload};
use gatehouse_core::console::{Answer, Caller, Command, Commands, ConsoleError, Refusal, Reply, Show, Target};

use super::view::{CoreView, Operation};

/// The app's console: every core, the endpoints and the reloader.
pub struct Console {
    pub cores: Vec<Arc<dyn CoreView>>,
    pub endpoints: Arc<dyn Listeners>,
    pub reloader: Arc<dyn Reload>,
}

impl Commands for Console {
    fn run<'a>(&'a self, caller: &'a Caller, command: Command) -> Answer<'a> {
        Box::pin(async move {
            match command {
                Command::Show(what) => Ok(Reply::Rows(self.show(what), "SHOW")),
                Command::Variables(names) => Ok(Reply::Rows(tables::variables(&names), "SELECT")),
                Command::Pause(target) => self.pause(target, true),
                Command::Resume(target) => self.pause(target, false),
                Command::Disable(endpoint) => self.disable(&endpoint, true),
                Command::Enable(endpoint) => self.disable(&endpoint, false),
                Command::Drain { cluster, backend } => self.drain(cluster, backend, true),
                Command::Undrain { cluster, backend } => self.drain(cluster, backend, false),
                Command::Switchover { cluster, backend } => self.switchover(&cluster, &backend).await,
                Command::Reload => self.reload().await,
                Command::Kill(id) => self.kill(caller, id),
            }
        })
    }
}

fn not_found(message: String) -> ConsoleError {
    ConsoleError::new(Refusal::NotFound, message)
}

impl Console {
    fn show(&self, what: Show) -> gatehouse_core::console::Table {
        match what {
            Show::Help => tables::help(),
            Show::Version => tables::version(),
            Show::Pools => tables::pools(&self.cores),
            Show::Clients => tables::clients(&self.cores),
            Show::Servers => tables::servers(&self.cores),
            Show::Backends => tables::backends(&self.cores),
            Show::Clusters => tables::clusters(&self.cores),
            Show::Endpoints => tables::endpoints(&self.cores, &*self.endpoints),
            Show::Stats => tables::stats(&self.cores),
            Show::Totals => tables::totals(&self.cores, &*self.reloader),
            Show::Digests => tables::digests(&self.cores),
            Show::Config => tables::config(&self.cores),
        }
    }

    /// The first core that carries `op` out.
    fn operate(&self, op: Operation) -> Option<Result<(), String>> {
        self.cores.iter().find_map(|c| c.operate(&op))
    }

    fn pause(&self, target: Target, paused: bool) -> Result<Reply, ConsoleError> {
        let (tag, verb) = if paused {
            ("PAUSE", "paused")
        } else {
            ("RESUME", "resumed")
        };
        let cluster = |cluster: String| Operation::PauseCluster { cluster, paused };
        let endpoint = |endpoint: String| Operation::PauseEndpoint { endpoint, paused };
        let done = match target {
            Target::All => {
                let names: Vec<String> = self
                    .cores
                    .iter()
                    .flat_map(|c| c.snapshot().clusters.into_iter().map(|v| v.cluster))
                    .collect();
                for name in &names {
                    self.operate(cluster(name.clone()));
                }
                return Ok(Reply::Done(tag, format!("{verb} every cluster ({})", names.len())));
            }
            Target::Cluster(name) => self
                .operate(cluster(name.clone()))
                .map(|r| (r, format!("cluster {name}"))),
            Target::Endpoint(name) => self
                .operate(endpoint(name.clone()))
                .map(|r| (r, format!("endpoint {name}"))),
            Target::Named(name) => self
                .operate(cluster(name.clone()))
                .map(|r| (r, format!("cluster {name}")))
                .or_else(|| {
                    self.operate(endpoint(name.clone()))
                        .map(|r| (r, format!("endpoint {name}")))
                }),
        };
        match done {
            Some((Ok(()), name)) => Ok(Reply::Done(tag, format!("{verb} {name}"))),
            Some((Err(e), _)) => Err(ConsoleError::new(Refusal::Failed, e)),
            None => Err(not_found("no such cluster or endpoint".to_owned())),
        }
    }

    fn disable(&self, endpoint: &str, disabled: bool) -> Result<Reply, ConsoleError> {
        if !self.cores.iter().any(|c| c.set_disabled(endpoint, disabled).is_some()) {
            return Err(not_found(format!("no such endpoint \"{endpoint}\"")));
        }
        Ok(if disabled {
            Reply::Done("DISABLE", format!("endpoint {endpoint} takes no new logins"))
        } else {
            Reply::Done("ENABLE", format!("endpoint {endpoint} takes new logins again"))
        })
    }

    fn drain(&self, cluster: String, backend: String, draining: bool) -> Result<Reply, ConsoleError> {
        let what = format!("backend {backend} of cluster {cluster}");
        match self.operate(Operation::Drain {
            cluster,
            backend,
            draining,
        }) {
            Some(Ok(())) if draining => Ok(Reply::Done("DRAIN", format!("{what} is draining"))),
            Some(Ok(())) => Ok(Reply::Done("UNDRAIN", format!("{what} takes leases again"))),
            Some(Err(e)) => Err(not_found(e)),
            None => Err(not_found("no such cluster".to_owned())),
        }
    }

    async fn switchover(&self, cluster: &str, backend: &str) -> Result<Reply, ConsoleError> {
        for core in &self.cores {
            if let Some(run) = core.switchover(cluster, backend) {
                return match run.await {
                    Ok(writer) => Ok(Reply::Done(
                        "SWITCHOVER",
                        format!("cluster {cluster} now writes to {writer}"),
                    )),
                    Err(e) => Err(ConsoleError::new(Refusal::Failed, e)),
                };
            }
        }
        Err(not_found(format!("no such cluster \"{cluster}\"")))
    }

    async fn reload(&self) -> Result<Reply, ConsoleError> {
        match self.reloader.reload().await {
            Ok(o) => {
                let mut line = format!("configuration reloaded: {} tenants, {} secrets", o.tenants, o.secrets);
                if !o.applied.is_empty() {
                    line.push_str(&format!("; applied: {}", o.applied.join(", ")));
                }
                if !o.not_applied.is_empty() {
                    line.push_str(&format!("; needs a restart: {}", o.not_applied.join(", ")));
                }
                Ok(Reply::Done("RELOAD", line))
            }
            Err(e) => Err(ConsoleError::new(Refusal::Failed, e.to_string())),
        }
    }

    fn kill(&self, caller: &Caller, id: u32) -> Result<Reply, ConsoleError> {
        if id == caller.client_id {
            return Err(ConsoleError::new(
                Refusal::Failed,
                "KILL of the console session itself: disconnect instead",
            ));
        }
        if self.cores.iter().any(|c| c.kill(id)) {
            Ok(Reply::Done("KILL", format!("client {id} is ending")))
        } else {
            Err(not_found(format!("no client with id {id}")))
        }
    }
}
