//! `mrc-sim`: a discrete-event fabric simulator that runs the real `mrc` engine on multi-plane topologies
//! under failures, for network planners. See `sim/README.md` for the model.

pub mod capture;
pub mod drill;
pub mod ideal;
pub mod metrics;
pub mod output;
pub mod plan;
pub mod plots;
mod prefetch;
pub mod queue;
pub mod report;
pub mod run;
pub mod scenario;
pub mod sim;
pub mod sweep;
pub mod topo;
pub mod workload;

pub use plan::Plan;
pub use report::Report;
pub use run::{run_scenario, run_scenario_captured, run_scenario_with};
pub use scenario::{Scenario, ScenarioError};
