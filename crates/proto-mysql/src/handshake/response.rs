//! The client's answer to the greeting: the 32-byte SSLRequest (sent before the TLS
//! upgrade) and the HandshakeResponse41 (user, auth response, database, plugin,
//! connection attributes). Both start with the same 32-byte prefix.
//!
//! Reference: MySQL "Protocol::SSLRequest", "Protocol::HandshakeResponse41";
//! MariaDB "Connection" (extended capabilities in the last 4 filler bytes).

use bytes::{BufMut, BytesMut};

use crate::consts::{
    CLIENT_CONNECT_ATTRS, CLIENT_CONNECT_WITH_DB, CLIENT_MYSQL, CLIENT_PLUGIN_AUTH,
    CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA, CLIENT_PROTOCOL_41, CLIENT_SECURE_CONNECTION, CLIENT_SSL,
    CLIENT_ZSTD_COMPRESSION_ALGORITHM,
};
use crate::error::DecodeError;
use crate::lenenc::{Reader, put_lenenc_bytes, put_lenenc_int, put_nul_bytes};

/// Length of the common prefix, which is the whole SSLRequest: capabilities (4),
/// max packet size (4), charset (1), filler (23).
pub const SSL_REQUEST_LEN: usize = 32;
/// Zero filler before MariaDB's extended capabilities (23 - 4 bytes).
const FILLER_ZEROS: usize = 19;

/// The shared 32-byte prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SslRequest {
    pub capabilities: u32,
    pub max_packet_size: u32,
    pub charset: u8,
    /// MariaDB extended capabilities (0 unless the client clears `CLIENT_MYSQL`).
    pub mariadb_ext_caps: u32,
}

impl SslRequest {
    /// Whether a first client payload is an SSLRequest rather than a full response.
    pub fn is_ssl_request(payload: &[u8]) -> bool {
        payload.len() == SSL_REQUEST_LEN
            && payload
                .get(..4)
                .is_some_and(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) & CLIENT_SSL != 0)
    }

    /// Decodes the 32-byte prefix of an SSLRequest or HandshakeResponse41.
    /// Rejects pre-4.1 clients with [`DecodeError::NotProtocol41`].
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        Self::read(&mut Reader::new(payload, "SSLRequest"))
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        // Pre-4.1 clients send 2-byte capabilities; look at the low word first.
        let low = r.clone().u16()?;
        if u32::from(low) & CLIENT_PROTOCOL_41 == 0 {
            return Err(DecodeError::NotProtocol41);
        }
        let capabilities = r.u32()?;
        let max_packet_size = r.u32()?;
        let charset = r.u8()?;
        r.skip(FILLER_ZEROS)?;
        let ext = r.u32()?;
        let mariadb_ext_caps = if capabilities & CLIENT_MYSQL == 0 { ext } else { 0 };
        Ok(SslRequest {
            capabilities,
            max_packet_size,
            charset,
            mariadb_ext_caps,
        })
    }

    /// Appends the 32-byte prefix.
    pub fn encode(&self, dst: &mut BytesMut) {
        dst.put_u32_le(self.capabilities);
        dst.put_u32_le(self.max_packet_size);
        dst.put_u8(self.charset);
        dst.put_bytes(0, FILLER_ZEROS);
        let ext = if self.capabilities & CLIENT_MYSQL == 0 {
            self.mariadb_ext_caps
        } else {
            0
        };
        dst.put_u32_le(ext);
    }
}

/// The full handshake response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandshakeResponse41 {
    pub capabilities: u32,
    pub max_packet_size: u32,
    pub charset: u8,
    pub mariadb_ext_caps: u32,
    pub username: String,
    pub auth_response: Vec<u8>,
    /// Present only with `CLIENT_CONNECT_WITH_DB` (empty names map to `None`).
    pub database: Option<String>,
    /// Present only with `CLIENT_PLUGIN_AUTH`.
    pub auth_plugin: Option<String>,
    /// Connection attributes (`CLIENT_CONNECT_ATTRS`), in wire order. Invalid UTF-8
    /// is replaced (attributes are informational and must not fail a login).
    pub attributes: Vec<(String, String)>,
    /// zstd level (`CLIENT_ZSTD_COMPRESSION_ALGORITHM`, MySQL 8).
    pub zstd_level: Option<u8>,
}

impl HandshakeResponse41 {
    /// Decodes a response. Identity fields (user, database, plugin) must be UTF-8.
    /// Optional trailing fields missing at the end of the payload are `None`.
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload, "HandshakeResponse41");
        let prefix = SslRequest::read(&mut r)?;
        let caps = prefix.capabilities;
        let username = r.nul_bytes()?;
        let username = r.utf8(username)?;
        let auth_response = read_auth_response(&mut r, caps)?.to_vec();
        let mut database = None;
        if caps & CLIENT_CONNECT_WITH_DB != 0 && !r.is_empty() {
            let db = r.nul_bytes()?;
            if !db.is_empty() {
                database = Some(r.utf8(db)?);
            }
        }
        let mut auth_plugin = None;
        if caps & CLIENT_PLUGIN_AUTH != 0 && !r.is_empty() {
            let name = r.nul_or_rest();
            auth_plugin = Some(r.utf8(name)?);
        }
        let mut attributes = Vec::new();
        if caps & CLIENT_CONNECT_ATTRS != 0 && !r.is_empty() {
            attributes = read_attributes(&mut r)?;
        }
        let mut zstd_level = None;
        if caps & CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0 && !r.is_empty() {
            zstd_level = Some(r.u8()?);
        }
        Ok(HandshakeResponse41 {
            capabilities: caps,
            max_packet_size: prefix.max_packet_size,
            charset: prefix.charset,
            mariadb_ext_caps: prefix.mariadb_ext_caps,
            username,
            auth_response,
            database,
            auth_plugin,
            attributes,
            zstd_level,
        })
    }

    /// Appends the response payload. The auth response uses the encoding selected
    /// by `capabilities` (lenenc, 1-byte length, or NUL-terminated); with the 1-byte
    /// form a response over 255 bytes is truncated, so set
    /// `CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA` for long responses.
    pub fn encode(&self, dst: &mut BytesMut) {
        let caps = self.capabilities;
        SslRequest {
            capabilities: caps,
            max_packet_size: self.max_packet_size,
            charset: self.charset,
            mariadb_ext_caps: self.mariadb_ext_caps,
        }
        .encode(dst);
        put_nul_bytes(dst, self.username.as_bytes());
        put_auth_response(dst, caps, &self.auth_response);
        if caps & CLIENT_CONNECT_WITH_DB != 0 {
            put_nul_bytes(dst, self.database.as_deref().unwrap_or("").as_bytes());
        }
        if caps & CLIENT_PLUGIN_AUTH != 0 {
            put_nul_bytes(dst, self.auth_plugin.as_deref().unwrap_or("").as_bytes());
        }
        if caps & CLIENT_CONNECT_ATTRS != 0 {
            put_attributes(dst, &self.attributes);
        }
        if caps & CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0 {
            dst.put_u8(self.zstd_level.unwrap_or(3));
        }
    }
}

/// Reads an auth response in the encoding `caps` selects.
pub(crate) fn read_auth_response<'a>(r: &mut Reader<'a>, caps: u32) -> Result<&'a [u8], DecodeError> {
    if caps & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
        r.lenenc_bytes()
    } else if caps & CLIENT_SECURE_CONNECTION != 0 {
        let len = usize::from(r.u8()?);
        r.bytes(len)
    } else {
        r.nul_bytes()
    }
}

/// Writes an auth response in the encoding `caps` selects.
pub(crate) fn put_auth_response(dst: &mut BytesMut, caps: u32, data: &[u8]) {
    if caps & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
        put_lenenc_bytes(dst, data);
    } else if caps & CLIENT_SECURE_CONNECTION != 0 {
        let data = &data[..data.len().min(255)];
        dst.put_u8(data.len() as u8);
        dst.extend_from_slice(data);
    } else {
        put_nul_bytes(dst, data);
    }
}

/// Reads the lenenc-prefixed block of lenenc key/value pairs.
pub(crate) fn read_attributes(r: &mut Reader<'_>) -> Result<Vec<(String, String)>, DecodeError> {
    let total = r.lenenc_int()?;
    let block = r.bytes(usize::try_from(total).unwrap_or(usize::MAX))?;
    let mut a = Reader::new(block, "connection attributes");
    let mut out = Vec::new();
    while !a.is_empty() {
        let k = String::from_utf8_lossy(a.lenenc_bytes()?).into_owned();
        let v = String::from_utf8_lossy(a.lenenc_bytes()?).into_owned();
        out.push((k, v));
    }
    Ok(out)
}

/// Writes the attribute block.
pub(crate) fn put_attributes(dst: &mut BytesMut, attrs: &[(String, String)]) {
    let mut block = BytesMut::new();
    for (k, v) in attrs {
        put_lenenc_bytes(&mut block, k.as_bytes());
        put_lenenc_bytes(&mut block, v.as_bytes());
    }
    put_lenenc_int(dst, block.len() as u64);
    dst.extend_from_slice(&block);
}
