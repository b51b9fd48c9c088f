//! Connection phase. This file owns the server greeting (Initial Handshake Packet,
//! protocol version 10); the submodules own the client's reply
//! ([`response`]: SSLRequest and HandshakeResponse41), the auth-method switch and
//! extra auth round trips ([`auth_switch`]) and COM_CHANGE_USER ([`change_user`]).
//!
//! Reference: MySQL "Protocol::HandshakeV10"; MariaDB "Connection" (the
//! `5.5.5-` version prefix and extended capabilities in the filler).

pub mod auth_switch;
pub mod change_user;
pub mod response;

pub use auth_switch::{AuthMoreData, AuthSwitchRequest};
pub use change_user::ChangeUser;
pub use response::{HandshakeResponse41, SslRequest};

use bytes::{BufMut, BytesMut};

use crate::auth::NONCE_LEN;
use crate::consts::{
    CLIENT_MYSQL, CLIENT_PLUGIN_AUTH, CLIENT_PROTOCOL_41, CLIENT_SECURE_CONNECTION, MARIADB_VERSION_PREFIX,
};
use crate::error::DecodeError;
use crate::lenenc::{Reader, put_nul_bytes};

/// The only greeting protocol version this crate speaks.
pub const PROTOCOL_VERSION: u8 = 10;
/// Bytes of the nonce sent before the capability flags ("auth-plugin-data-part-1").
pub const NONCE_PART1_LEN: usize = 8;
/// `auth-plugin-data-len` a server announces: 20 nonce bytes plus a NUL.
pub const AUTH_PLUGIN_DATA_LEN: u8 = 21;
/// The reserved area after `auth-plugin-data-len` (MariaDB: 6 zero bytes and the
/// 4-byte extended capabilities).
pub const GREETING_RESERVED_LEN: usize = 10;

/// The server's greeting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeV10 {
    /// As sent; MariaDB servers prefix it with `5.5.5-` (see [`Self::real_version`]).
    pub server_version: String,
    pub connection_id: u32,
    /// The 20-byte nonce (part 1 and part 2 joined, without the trailing NUL).
    pub scramble: [u8; NONCE_LEN],
    /// Lower and upper capability words joined.
    pub capabilities: u32,
    /// MariaDB extended capabilities (`MARIADB_CLIENT_*`); present on the wire only
    /// when `capabilities` lacks [`CLIENT_MYSQL`], otherwise 0.
    pub mariadb_ext_caps: u32,
    /// Default collation id.
    pub charset: u8,
    /// Server status flags.
    pub status: u16,
    /// Default auth plugin (empty if the server lacks `CLIENT_PLUGIN_AUTH`).
    pub auth_plugin: String,
}

impl HandshakeV10 {
    /// Whether the server is MariaDB (`5.5.5-` prefix or "MariaDB" in the version).
    pub fn is_mariadb(&self) -> bool {
        self.server_version.starts_with(MARIADB_VERSION_PREFIX) || self.server_version.contains("MariaDB")
    }

    /// The version without MariaDB's `5.5.5-` compatibility prefix.
    pub fn real_version(&self) -> &str {
        self.server_version
            .strip_prefix(MARIADB_VERSION_PREFIX)
            .unwrap_or(&self.server_version)
    }

    /// Appends the greeting payload (no packet header; it goes out with seq 0).
    /// The plugin-data length is always 21 and the nonce's part 2 ends with a NUL.
    pub fn encode(&self, dst: &mut BytesMut) {
        dst.put_u8(PROTOCOL_VERSION);
        put_nul_bytes(dst, self.server_version.as_bytes());
        dst.put_u32_le(self.connection_id);
        dst.extend_from_slice(&self.scramble[..NONCE_PART1_LEN]);
        dst.put_u8(0);
        dst.put_u16_le(self.capabilities as u16);
        dst.put_u8(self.charset);
        dst.put_u16_le(self.status);
        dst.put_u16_le((self.capabilities >> 16) as u16);
        if self.capabilities & CLIENT_PLUGIN_AUTH != 0 {
            dst.put_u8(AUTH_PLUGIN_DATA_LEN);
        } else {
            dst.put_u8(0);
        }
        dst.put_bytes(0, GREETING_RESERVED_LEN - 4);
        if self.capabilities & CLIENT_MYSQL == 0 {
            dst.put_u32_le(self.mariadb_ext_caps);
        } else {
            dst.put_u32_le(0);
        }
        put_nul_bytes(dst, &self.scramble[NONCE_PART1_LEN..]);
        if self.capabilities & CLIENT_PLUGIN_AUTH != 0 {
            put_nul_bytes(dst, self.auth_plugin.as_bytes());
        }
    }

    /// Parses a greeting. Requires protocol 10, `CLIENT_PROTOCOL_41` and
    /// `CLIENT_SECURE_CONNECTION` (every server since 4.1). An ERR packet here
    /// (e.g. "Too many connections") is reported as `UnexpectedHeader { header:
    /// 0xFF }`; decode it with [`crate::packets::ErrPacket`].
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload, "HandshakeV10");
        let version = r.u8()?;
        if version == 0xFF {
            return Err(DecodeError::UnexpectedHeader {
                what: "HandshakeV10",
                header: 0xFF,
            });
        }
        if version != PROTOCOL_VERSION {
            return Err(DecodeError::ProtocolVersion(version));
        }
        let server_version = r.nul_bytes()?;
        let server_version = r.utf8(server_version)?;
        let connection_id = r.u32()?;
        let part1 = r.bytes(NONCE_PART1_LEN)?;
        r.skip(1)?;
        let caps_lower = r.u16()?;
        let charset = r.u8()?;
        let status = r.u16()?;
        let caps_upper = r.u16()?;
        let capabilities = u32::from(caps_lower) | u32::from(caps_upper) << 16;
        if capabilities & CLIENT_PROTOCOL_41 == 0 || capabilities & CLIENT_SECURE_CONNECTION == 0 {
            return Err(r.invalid("server lacks CLIENT_PROTOCOL_41/CLIENT_SECURE_CONNECTION"));
        }
        let data_len = usize::from(r.u8()?);
        r.skip(GREETING_RESERVED_LEN - 4)?;
        let ext = r.u32()?;
        let mariadb_ext_caps = if capabilities & CLIENT_MYSQL == 0 { ext } else { 0 };
        // Part 2 is max(13, data_len - 8) bytes: 12 nonce bytes and a NUL.
        let part2_len = data_len.saturating_sub(NONCE_PART1_LEN).max(13);
        let part2 = r.bytes(part2_len.min(r.remaining()))?;
        let part2_nonce = NONCE_LEN - NONCE_PART1_LEN;
        let part2 = part2.get(..part2_nonce).ok_or_else(|| DecodeError::Truncated {
            what: "HandshakeV10",
            needed: part2_nonce.saturating_sub(part2.len()),
        })?;
        let mut scramble = [0u8; NONCE_LEN];
        scramble[..NONCE_PART1_LEN].copy_from_slice(part1);
        scramble[NONCE_PART1_LEN..].copy_from_slice(part2);
        let auth_plugin = if capabilities & CLIENT_PLUGIN_AUTH != 0 {
            // MySQL 5.5.7-5.5.9 omitted the terminator.
            let name = r.nul_or_rest();
            r.utf8(name)?
        } else {
            String::new()
        };
        Ok(HandshakeV10 {
            server_version,
            connection_id,
            scramble,
            capabilities,
            mariadb_ext_caps,
            charset,
            status,
            auth_plugin,
        })
    }
}
