//! Fuzz target: PCP's PDU decoders (what a pmcd-compatible port reads from any client) must
//! never panic, never accept a PDU whose header length is out of bounds, and every name list
//! they accept must encode back to a PDU that decodes to the same names.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../runtime/src/pcp/wire.rs"]
mod wire;

#[allow(dead_code)]
#[path = "../../runtime/src/pcp/pdu.rs"]
mod pdu;

fuzz_target!(|data: &[u8]| {
    // As read off the wire: the header first, checked, then exactly its length.
    if data.len() >= wire::HEADER {
        let head: [u8; wire::HEADER] = data[..wire::HEADER].try_into().unwrap();
        if let Ok(h) = wire::Header::parse(&head, wire::MAX_CLIENT_PDU) {
            assert!(h.len as usize >= wire::HEADER && h.len as usize <= wire::MAX_CLIENT_PDU);
            if let Some(pdu) = data.get(..h.len as usize) {
                check(pdu);
            }
        }
    }
    // And the bytes as they are, whatever their length word says.
    check(data);
});

fn check(pdu: &[u8]) {
    match pdu::decode(pdu) {
        Ok(pdu::Request::Names(names)) => {
            let again = pdu::names(&names, None);
            assert_eq!(pdu::decode(&again), Ok(pdu::Request::Names(names)));
        }
        Ok(pdu::Request::Ids(ids)) => {
            let again = pdu::ids(0, &ids);
            assert_eq!(pdu::decode(&again), Ok(pdu::Request::Ids(ids)));
        }
        Ok(_) | Err(_) => {}
    }
}
