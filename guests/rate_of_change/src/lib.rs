//! The `rate_of_change` transformer (Ceilometer semantics; logic in `wasmon-ceilometer`).
wasmon_guest::export_transformer!(wasmon_ceilometer::RateOfChange);
