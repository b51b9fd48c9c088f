//! A console table ([`gatehouse_core::console::Table`]) as a MySQL text
//! result set: what the console answers, and what a session's `SHOW
//! PROCESSLIST`-style answers built by the proxy write.

use bytes::BytesMut;
use gatehouse_proto_mysql::packets::EofPacket;
use gatehouse_proto_mysql::results;

use crate::io::put_packet;
use gatehouse_core::console::{Cell, ColumnType, Table};

fn kind_of(t: ColumnType) -> u8 {
    match t {
        ColumnType::Text => results::MYSQL_TYPE_VAR_STRING,
        ColumnType::Integer => results::MYSQL_TYPE_LONGLONG,
        ColumnType::Real => results::MYSQL_TYPE_DOUBLE,
    }
}

/// An EOF packet's payload with `status`.
fn eof(status: u16) -> BytesMut {
    let mut payload = BytesMut::new();
    EofPacket { warnings: 0, status }.encode(&mut payload);
    payload
}

/// Writes `table` as a text result set from sequence id `seq`, its final
/// EOF with `status`; returns the next sequence id.
/// `extended`: column definitions in MariaDB's extended form
/// ([`results::put_column_definition`]).
pub(crate) fn put_table(out: &mut BytesMut, mut seq: u8, table: &Table, status: u16, extended: bool) -> u8 {
    let mut p = BytesMut::new();
    results::put_column_count(&mut p, table.columns.len());
    seq = put_packet(out, seq, &p);
    for (name, t) in &table.columns {
        let mut p = BytesMut::new();
        results::put_column_definition(&mut p, name, kind_of(*t), extended);
        seq = put_packet(out, seq, &p);
    }
    seq = put_packet(out, seq, &eof(status));
    for row in &table.rows {
        let texts: Vec<Option<String>> = row.iter().map(Cell::text).collect();
        let values: Vec<Option<&str>> = texts.iter().map(Option::as_deref).collect();
        let mut p = BytesMut::new();
        results::put_text_row(&mut p, &values);
        seq = put_packet(out, seq, &p);
    }
    put_packet(out, seq, &eof(status))
}
