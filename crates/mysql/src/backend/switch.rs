//! Moving a backend connection to another tenant: COM_CHANGE_USER (any
//! user and database, through the same authentication exchange as a login)
//! and, for the same user, COM_RESET_CONNECTION with COM_INIT_DB.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use zeroize::Zeroizing;

use super::{MyConn, auth, io_error, malformed};
use gatehouse_core::backend_tls::BackendTls;
use gatehouse_core::engine::SwitchError;
use gatehouse_core::error::ProxyError;

impl MyConn {
    /// Logs the connection in again as `user` on `database` (none when
    /// `None`) with COM_CHANGE_USER, within `timeout`: how a pooled
    /// connection moves to another tenant without a new connection. The
    /// server resets the session as for a new connection, and so does what
    /// the connection tracks of it; its `KILL QUERY`s log in as the new
    /// user from now on. An error leaves the connection unusable: the
    /// caller closes it.
    pub async fn change_user(
        &mut self,
        user: &str,
        password: &[u8],
        database: Option<&str>,
        timeout: Duration,
        tls: &BackendTls,
    ) -> Result<(), ProxyError> {
        let who = auth::Login {
            addr: &self.addr,
            tls,
            user,
            password,
            database,
            session_caps: 0,
            session_ext_caps: 0,
        };
        let exchange = auth::change_user(
            &mut self.stream,
            &mut self.rbuf,
            self.caps,
            &self.auth_plugin,
            self.nonce,
            &who,
        );
        let (status, nonce) = match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r.map_err(|e| e.into_proxy(&self.addr, user, database))?,
            Err(_) => {
                return Err(io_error(
                    &self.addr,
                    format!("COM_CHANGE_USER timed out after {timeout:?}"),
                ));
            }
        };
        if !self.rbuf.is_empty() {
            return Err(malformed(&self.addr, "data after the reply to COM_CHANGE_USER"));
        }
        self.status = status;
        self.nonce = nonce;
        self.database = database.filter(|d| !d.is_empty()).map(str::to_owned);
        self.forget_session_state();
        self.cancel.user = Arc::from(user);
        self.cancel.password = Arc::new(Zeroizing::new(password.to_vec()));
        // COM_CHANGE_USER gives the session the global `sql_mode` and
        // `wait_timeout`, without what the connection's login added.
        self.restore_login_session().await
    }

    /// Moves a connection to `database` for the same user: COM_RESET_CONNECTION
    /// and COM_INIT_DB sent together (one round trip), within `timeout`.
    /// The session is reset as by [`MyConn::reset`]. When the server
    /// refuses only the database, the connection is left reset on its old
    /// database, usable ([`SwitchError::intact`]).
    pub async fn reset_to_database(&mut self, database: &str, timeout: Duration) -> Result<(), SwitchError> {
        let broken = |error| SwitchError { error, intact: false };
        let work = async {
            self.frame_reset(Some(database));
            self.stream
                .write_all(&self.wbuf)
                .await
                .map_err(|e| io_error(&self.addr, e))?;
            self.read_ok("COM_RESET_CONNECTION").await?;
            self.forget_session_state();
            // Only the second reply is left: an ERR to it leaves the
            // connection in step, reset.
            let p = self.read_packet().await?;
            let selected = self.ok_or_error(&p.payload, "COM_INIT_DB");
            if selected.is_ok() {
                self.database = Some(database.to_owned()).filter(|d| !d.is_empty());
            }
            Ok(selected)
        };
        let refused = match tokio::time::timeout(timeout, work).await {
            Ok(r) => r.map_err(broken)?,
            Err(_) => {
                return Err(broken(io_error(
                    &self.addr,
                    format!("reset timed out after {timeout:?}"),
                )));
            }
        };
        if !self.rbuf.is_empty() {
            return Err(broken(malformed(&self.addr, "data after the reply to COM_INIT_DB")));
        }
        self.restore_login_session().await.map_err(broken)?;
        refused.map_err(|error| SwitchError { error, intact: true })
    }
}
