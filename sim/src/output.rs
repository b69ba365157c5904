//! The files of a run: report.json, summary.txt, the echoed scenario (with copies of imported files), CSVs and
//! the plots. Kept apart from `report` so the report does not depend on how it is drawn.

use std::fmt::Write as _;
use std::path::Path;

use crate::report::Report;
use crate::topo::PortKind;

impl Report {
    /// Writes report.json, summary.txt, scenario.toml, CSVs and SVG plots into `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("report.json"), self.to_json())?;
        let replay =
            "replay: mrc-sim run scenario.toml (the copy of the scenario in this folder)\n";
        std::fs::write(dir.join("summary.txt"), self.summary() + replay)?;
        std::fs::write(
            dir.join("scenario.toml"),
            toml::to_string(&self.scenario).unwrap_or_default(),
        )?;
        for (from, name) in &self.imports {
            std::fs::copy(from, dir.join(name))?;
        }
        let r = &self.run;
        let mut f = format!(
            "transfer,src,dst,bytes,start_us,end_us,fct_us,{}\n",
            crate::drill::csv_header(self.planes)
        );
        let none = crate::drill::FlowCounters {
            plane_bytes: vec![0; self.planes as usize],
            ..Default::default()
        };
        for (i, (s, e)) in r.times_us.iter().enumerate() {
            let (src, dst, b) = self.flows.get(i).copied().unwrap_or((0, 0, 0));
            let fct = if *e >= 0.0 { e - s } else { -1.0 };
            let drill = r.flows.get(i).unwrap_or(&none).csv();
            let _ = writeln!(f, "{i},{src},{dst},{b},{s:.4},{e:.4},{fct:.4},{drill}");
        }
        std::fs::write(dir.join("flows.csv"), f)?;
        let mut g = String::from("bin_start_us");
        for p in 0..self.planes {
            let _ = write!(g, ",plane{p}_gbps");
        }
        g.push('\n');
        for (b, row) in r.goodput_gbps.iter().enumerate() {
            let _ = write!(g, "{:.3}", b as f64 * r.bin_us);
            for x in row {
                let _ = write!(g, ",{x:.3}");
            }
            g.push('\n');
        }
        std::fs::write(dir.join("goodput.csv"), g)?;
        let mut q = String::from("bin_start_us");
        for k in PortKind::ALL {
            let _ = write!(q, ",{}_max_bytes", k.name());
        }
        q.push('\n');
        for (b, row) in r.queue_max_bytes.iter().enumerate() {
            let _ = write!(q, "{:.3}", b as f64 * r.bin_us);
            for x in row {
                let _ = write!(q, ",{x}");
            }
            q.push('\n');
        }
        std::fs::write(dir.join("queues.csv"), q)?;
        // Plots.
        let plot = |name: &str, svg: Result<String, String>| {
            std::fs::write(dir.join(name), svg.map_err(std::io::Error::other)?)
        };
        plot("goodput.svg", crate::plots::goodput_svg(self))?;
        plot("fct_cdf.svg", crate::plots::fct_svg(self))?;
        plot("queues.svg", crate::plots::queues_svg(self))?;
        Ok(())
    }
}
