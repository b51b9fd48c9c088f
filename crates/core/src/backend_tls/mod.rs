//! TLS toward the database servers, for both engines: the settings (a
//! cluster's `backend_tls` mode, the rustls client configuration built
//! from its files) are the settings crate's ([`gatehouse_settings::backend_tls`],
//! re-exported here); what runs them is here: the handshake on a backend
//! socket and the socket type the engines' drivers read and write
//! ([`stream`]).

pub mod stream;

pub use gatehouse_settings::backend_tls::*;
pub use stream::{BackendStream, Connect};

#[cfg(test)]
mod tests;
