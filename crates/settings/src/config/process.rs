//! The process-wide sections, checked: `[proxy]` (timeouts, limits, logging,
//! the upgrade socket) and `[admin]` (the admin listener and its token).

use std::net::SocketAddr;
use std::num::NonZeroU32;

use gatehouse_proto_pg::frame::PQ_LARGE_MESSAGE_LIMIT;

use toml::Spanned;

use super::model::*;
use super::raw::*;
use super::validate::*;

pub(super) fn admin(cx: &mut Ctx, raw: &Spanned<RawAdmin>) -> Option<AdminSettings> {
    let a = raw.get_ref();
    let listen = match a.listen.get_ref().parse::<SocketAddr>() {
        Ok(l) => l,
        Err(e) => {
            cx.at(&a.listen, format!("admin listen address: {e}"));
            return None;
        }
    };
    let token = match &a.token_file {
        None => None,
        Some(file) => match std::fs::read_to_string(cx.base.join(file.get_ref())) {
            Ok(t) if !t.trim().is_empty() => Some(zeroize::Zeroizing::new(t.trim().to_owned())),
            Ok(_) => {
                cx.at(file, "admin token_file is empty");
                return None;
            }
            Err(e) => {
                cx.at(file, format!("cannot read admin token_file: {e}"));
                return None;
            }
        },
    };
    Some(AdminSettings { listen, token })
}

pub(super) fn proxy_settings(cx: &mut Ctx, p: &RawProxy) -> ProxySettings {
    let max = p
        .max_message_bytes
        .as_ref()
        .map_or(DEFAULT_MAX_MESSAGE_BYTES, |m| *m.get_ref());
    if let Some(m) = &p.max_message_bytes
        && !(1024..=PQ_LARGE_MESSAGE_LIMIT as u64).contains(m.get_ref())
    {
        cx.at(
            m,
            format!("max_message_bytes must be between 1024 and {PQ_LARGE_MESSAGE_LIMIT}"),
        );
    }
    if let Some(f) = &p.log_filter
        && let Err(e) = crate::logging::parse_filter(f.get_ref())
    {
        cx.at(f, format!("log_filter: {e}"));
    }
    let log_format = match p.log_format.as_ref().map(|f| (f, f.get_ref().as_str())) {
        None | Some((_, "text")) => LogFormat::Text,
        Some((_, "json")) => LogFormat::Json,
        Some((f, other)) => {
            cx.at(f, format!("log_format must be \"text\" or \"json\", not {other:?}"));
            LogFormat::Text
        }
    };
    let per_address = failures_per_minute(
        cx,
        &p.auth_failures_per_minute_per_address,
        "auth_failures_per_minute_per_address",
        crate::limits::DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_ADDRESS,
    );
    let per_user = failures_per_minute(
        cx,
        &p.auth_failures_per_minute_per_user,
        "auth_failures_per_minute_per_user",
        crate::limits::DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_USER,
    );
    ProxySettings {
        login_timeout: p.login_timeout.unwrap_or(DEFAULT_LOGIN_TIMEOUT),
        client_message_timeout: p.client_message_timeout.unwrap_or(DEFAULT_CLIENT_MESSAGE_TIMEOUT),
        shutdown_timeout: p.shutdown_timeout.unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT),
        park_idle_after: Some(p.park_idle_after.unwrap_or(DEFAULT_PARK_IDLE_AFTER)).filter(|d| !d.is_zero()),
        max_message_bytes: usize::try_from(max).unwrap_or(usize::MAX),
        log_filter: p
            .log_filter
            .as_ref()
            .map_or_else(|| "info".into(), |f| f.get_ref().clone()),
        log_format,
        worker_threads: p.worker_threads.as_ref().map_or(1, |w| *w.get_ref()),
        tenant_directory: p.tenant_directory.as_ref().map(|d| d.get_ref().clone()),
        auth_failures_per_minute_per_address: per_address,
        auth_failures_per_minute_per_user: per_user,
        upgrade_socket: upgrade_socket(cx, p.upgrade_socket.as_ref()),
    }
}

/// The longest path a Unix socket address holds: `sun_path` is 108 bytes
/// with its terminating NUL (unix(7)).
const MAX_UNIX_SOCKET_PATH: usize = 107;

fn upgrade_socket(cx: &mut Ctx, raw: Option<&Spanned<String>>) -> Option<std::path::PathBuf> {
    let raw = raw?;
    let path = cx.base.join(raw.get_ref());
    let len = path.as_os_str().len();
    if raw.get_ref().is_empty() || len > MAX_UNIX_SOCKET_PATH {
        cx.at(
            raw,
            format!("upgrade_socket must be a path of 1 to {MAX_UNIX_SOCKET_PATH} bytes (taken from the configuration's directory: {len})"),
        );
        return None;
    }
    Some(path)
}

fn failures_per_minute(cx: &mut Ctx, value: &Option<Spanned<u32>>, key: &str, default: u32) -> NonZeroU32 {
    let fallback = NonZeroU32::new(default).unwrap_or(NonZeroU32::MIN);
    let Some(v) = value else {
        return fallback;
    };
    NonZeroU32::new(*v.get_ref()).unwrap_or_else(|| {
        cx.at(v, format!("{key} must be at least 1"));
        fallback
    })
}
