//! The ClusterCockpit profile (issue 30): the `clustercockpit` transformer's formulas, one
//! test each, through the real component; and a node on the profile against a central.

#[path = "clustercockpit/tree.rs"]
mod tree;

#[path = "clustercockpit/guest_tree.rs"]
mod guest_tree;

#[path = "clustercockpit/jobs_nfs.rs"]
mod jobs_nfs;

#[path = "clustercockpit/node.rs"]
mod node;

#[path = "clustercockpit/formulas.rs"]
mod formulas;

#[path = "clustercockpit/formulas_jobs_nfs.rs"]
mod formulas_jobs_nfs;
