//! The `delta` transformer (Ceilometer semantics; logic in `wasmon-ceilometer`).
wasmon_guest::export_transformer!(wasmon_ceilometer::Delta);
