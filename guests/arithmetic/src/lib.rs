//! The `arithmetic` transformer (Ceilometer semantics; logic in `wasmon-ceilometer`).
wasmon_guest::export_transformer!(wasmon_ceilometer::Arithmetic);
