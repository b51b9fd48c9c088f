//! The parameter block of COM_STMT_EXECUTE: NULL bitmap, "new params bound" flag,
//! parameter types and values. The proxy forwards the block untouched but must
//! know whether the client relies on types it sent with an earlier execute (flag
//! 0) so it can supply them when it re-prepares the statement on another backend.
//!
//! Layout assumes `CLIENT_QUERY_ATTRIBUTES` is not negotiated (no parameter count
//! or names in the block). Reference: MySQL "COM_STMT_EXECUTE".

use bytes::{BufMut, BytesMut};

use crate::consts::COM_STMT_EXECUTE;
use crate::error::DecodeError;
use crate::lenenc::Reader;

/// Bytes before the parameter block: command, stmt_id (4), flags (1),
/// iteration_count (4).
pub const EXECUTE_HEADER_LEN: usize = 10;
/// Bytes per parameter in the type list: `int<1> type`, `int<1> flags` (0x80 =
/// unsigned).
pub const PARAM_TYPE_LEN: usize = 2;

/// Length of the NULL bitmap for `num_params` parameters (offset 0 for params).
pub fn null_bitmap_len(num_params: u16) -> usize {
    usize::from(num_params).div_ceil(8)
}

/// The parameter block, borrowed from the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecuteParams<'a> {
    pub null_bitmap: &'a [u8],
    /// Whether the client sent types with this execute.
    pub new_params_bound: bool,
    /// `2 * num_params` bytes when `new_params_bound`.
    pub types: Option<&'a [u8]>,
    /// The binary-encoded values (opaque here: their lengths depend on the types).
    pub values: &'a [u8],
}

/// Splits the parameter block of a whole COM_STMT_EXECUTE payload for a statement
/// with `num_params` parameters (known from its COM_STMT_PREPARE_OK). With no
/// parameters there is no block: empty bitmap, `new_params_bound == false`.
pub fn parse_params(payload: &[u8], num_params: u16) -> Result<ExecuteParams<'_>, DecodeError> {
    let mut r = Reader::new(payload, "COM_STMT_EXECUTE");
    let header = r.u8()?;
    if header != COM_STMT_EXECUTE {
        return Err(DecodeError::UnexpectedHeader {
            what: "COM_STMT_EXECUTE",
            header,
        });
    }
    r.skip(EXECUTE_HEADER_LEN - 1)?;
    if num_params == 0 {
        return Ok(ExecuteParams {
            null_bitmap: &[],
            new_params_bound: false,
            types: None,
            values: r.rest(),
        });
    }
    let null_bitmap = r.bytes(null_bitmap_len(num_params))?;
    let new_params_bound = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(r.invalid("new-params-bound flag is neither 0 nor 1")),
    };
    let types = if new_params_bound {
        Some(r.bytes(usize::from(num_params) * PARAM_TYPE_LEN)?)
    } else {
        None
    };
    Ok(ExecuteParams {
        null_bitmap,
        new_params_bound,
        types,
        values: r.rest(),
    })
}

/// The "new params bound" flag (false when the statement has no parameters).
pub fn new_params_bound(payload: &[u8], num_params: u16) -> Result<bool, DecodeError> {
    parse_params(payload, num_params).map(|p| p.new_params_bound)
}

/// The parameter types sent with this execute, if any.
pub fn param_types(payload: &[u8], num_params: u16) -> Result<Option<&[u8]>, DecodeError> {
    parse_params(payload, num_params).map(|p| p.types)
}

/// Rebuilds an execute whose flag is 0 into one that binds `types` (flag 1), for a
/// statement freshly prepared on another backend. A payload that already binds
/// types is copied unchanged. `types` must be `2 * num_params` bytes.
pub fn with_param_types(payload: &[u8], num_params: u16, types: &[u8]) -> Result<BytesMut, DecodeError> {
    let p = parse_params(payload, num_params)?;
    if num_params == 0 || p.new_params_bound {
        return Ok(BytesMut::from(payload));
    }
    if types.len() != usize::from(num_params) * PARAM_TYPE_LEN {
        return Err(DecodeError::Invalid {
            what: "COM_STMT_EXECUTE",
            detail: "parameter types are not 2 bytes per parameter",
        });
    }
    let flag_at = EXECUTE_HEADER_LEN + p.null_bitmap.len();
    let mut out = BytesMut::with_capacity(payload.len() + types.len());
    out.extend_from_slice(&payload[..flag_at]);
    out.put_u8(1);
    out.extend_from_slice(types);
    out.extend_from_slice(p.values);
    Ok(out)
}
