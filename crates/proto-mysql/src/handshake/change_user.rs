//! COM_CHANGE_USER: re-authenticate an open connection as another user (the
//! server's reply is an auth exchange ending in OK or ERR, see
//! [`crate::response::ResponseKind::ChangeUser`]).
//!
//! Reference: MySQL "COM_CHANGE_USER".

use bytes::{BufMut, BytesMut};

use super::response::{put_attributes, read_attributes};
use crate::consts::{CLIENT_CONNECT_ATTRS, CLIENT_PLUGIN_AUTH, CLIENT_SECURE_CONNECTION, COM_CHANGE_USER};
use crate::error::DecodeError;
use crate::lenenc::{Reader, put_nul_bytes};

/// The COM_CHANGE_USER payload. Fields after the database are optional on the
/// wire (old clients stop there).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChangeUser {
    pub username: String,
    pub auth_response: Vec<u8>,
    /// Empty string: no default database.
    pub database: String,
    pub charset: Option<u16>,
    pub auth_plugin: Option<String>,
    pub attributes: Vec<(String, String)>,
}

impl ChangeUser {
    /// Decodes a full COM_CHANGE_USER payload (including the 0x11 byte) using the
    /// session's negotiated capabilities `caps`: the auth response has a 1-byte
    /// length with `CLIENT_SECURE_CONNECTION`, else it is NUL-terminated.
    pub fn decode(payload: &[u8], caps: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload, "COM_CHANGE_USER");
        let header = r.u8()?;
        if header != COM_CHANGE_USER {
            return Err(DecodeError::UnexpectedHeader {
                what: "COM_CHANGE_USER",
                header,
            });
        }
        let user = r.nul_bytes()?;
        let username = r.utf8(user)?;
        let auth_response = if caps & CLIENT_SECURE_CONNECTION != 0 {
            let len = usize::from(r.u8()?);
            r.bytes(len)?
        } else {
            r.nul_bytes()?
        }
        .to_vec();
        let db = r.nul_bytes()?;
        let database = r.utf8(db)?;
        let mut out = ChangeUser {
            username,
            auth_response,
            database,
            ..Default::default()
        };
        if r.is_empty() {
            return Ok(out);
        }
        out.charset = Some(r.u16()?);
        if caps & CLIENT_PLUGIN_AUTH != 0 && !r.is_empty() {
            let name = r.nul_or_rest();
            out.auth_plugin = Some(r.utf8(name)?);
        }
        if caps & CLIENT_CONNECT_ATTRS != 0 && !r.is_empty() {
            out.attributes = read_attributes(&mut r)?;
        }
        Ok(out)
    }

    /// Appends the payload (including the 0x11 byte) for capabilities `caps`. A
    /// missing charset is written as 0 when later fields follow.
    pub fn encode(&self, dst: &mut BytesMut, caps: u32) {
        dst.put_u8(COM_CHANGE_USER);
        put_nul_bytes(dst, self.username.as_bytes());
        if caps & CLIENT_SECURE_CONNECTION != 0 {
            let data = &self.auth_response[..self.auth_response.len().min(255)];
            dst.put_u8(data.len() as u8);
            dst.extend_from_slice(data);
        } else {
            put_nul_bytes(dst, &self.auth_response);
        }
        put_nul_bytes(dst, self.database.as_bytes());
        let plugin = caps & CLIENT_PLUGIN_AUTH != 0;
        let attrs = caps & CLIENT_CONNECT_ATTRS != 0;
        if self.charset.is_none() && !plugin && !attrs {
            return;
        }
        dst.put_u16_le(self.charset.unwrap_or(0));
        if plugin {
            put_nul_bytes(dst, self.auth_plugin.as_deref().unwrap_or("").as_bytes());
        }
        if attrs {
            put_attributes(dst, &self.attributes);
        }
    }
}
