//! Extra round trips of the auth exchange: AuthSwitchRequest (0xFE, the server asks
//! for another plugin) and AuthMoreData (0x01, plugin-specific data such as
//! `caching_sha2_password`'s fast-auth result). The client's answer to either is
//! raw plugin bytes in its own packet, with no header.
//!
//! Reference: MySQL "Protocol::AuthSwitchRequest", "Protocol::AuthMoreData".

use bytes::{BufMut, BytesMut};

use crate::auth::NONCE_LEN;
use crate::error::DecodeError;
use crate::lenenc::{Reader, put_nul_bytes};

/// Header byte of AuthSwitchRequest.
pub const AUTH_SWITCH_HEADER: u8 = 0xFE;
/// Header byte of AuthMoreData.
pub const AUTH_MORE_DATA_HEADER: u8 = 0x01;

/// The server asks the client to restart authentication with `plugin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSwitchRequest {
    pub plugin: String,
    /// Plugin data as sent; for the password plugins the 20-byte nonce followed by a
    /// NUL (see [`Self::nonce`]).
    pub data: Vec<u8>,
}

impl AuthSwitchRequest {
    /// A request carrying a 20-byte nonce plus the customary trailing NUL.
    pub fn with_nonce(plugin: &str, nonce: &[u8; NONCE_LEN]) -> Self {
        let mut data = nonce.to_vec();
        data.push(0);
        AuthSwitchRequest {
            plugin: plugin.to_owned(),
            data,
        }
    }

    /// The 20-byte nonce, if `data` is 20 bytes or 20 bytes and a NUL.
    pub fn nonce(&self) -> Option<[u8; NONCE_LEN]> {
        let d = match self.data.len() {
            NONCE_LEN => &self.data[..],
            21 if self.data[NONCE_LEN] == 0 => &self.data[..NONCE_LEN],
            _ => return None,
        };
        let mut out = [0u8; NONCE_LEN];
        out.copy_from_slice(d);
        Some(out)
    }

    /// Decodes the payload. The pre-4.1 one-byte "old auth switch" is rejected.
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload, "AuthSwitchRequest");
        let header = r.u8()?;
        if header != AUTH_SWITCH_HEADER {
            return Err(DecodeError::UnexpectedHeader {
                what: "AuthSwitchRequest",
                header,
            });
        }
        if r.is_empty() {
            return Err(r.invalid("old (pre-4.1) auth switch is not supported"));
        }
        let plugin = r.nul_bytes()?;
        let plugin = r.utf8(plugin)?;
        Ok(AuthSwitchRequest {
            plugin,
            data: r.rest().to_vec(),
        })
    }

    pub fn encode(&self, dst: &mut BytesMut) {
        dst.put_u8(AUTH_SWITCH_HEADER);
        put_nul_bytes(dst, self.plugin.as_bytes());
        dst.extend_from_slice(&self.data);
    }
}

/// Extra plugin data from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthMoreData {
    pub data: Vec<u8>,
}

impl AuthMoreData {
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        match payload.split_first() {
            Some((&AUTH_MORE_DATA_HEADER, rest)) => Ok(AuthMoreData { data: rest.to_vec() }),
            Some((&header, _)) => Err(DecodeError::UnexpectedHeader {
                what: "AuthMoreData",
                header,
            }),
            None => Err(DecodeError::Empty),
        }
    }

    pub fn encode(&self, dst: &mut BytesMut) {
        dst.put_u8(AUTH_MORE_DATA_HEADER);
        dst.extend_from_slice(&self.data);
    }
}
