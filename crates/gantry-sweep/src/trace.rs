//! openb CSVs (the artifact's `data/csv/`): nodes `sn,cpu_milli,memory_mib,gpu,model`,
//! tasks `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,...`, read as the artifact's
//! `data/pod_csv_to_yaml.py` writes its pods. Errors name the file, line and field.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gantry_framework::plugins::openb::{NodeRes, PodRes};
use smallvec::SmallVec;

/// A field that could not be read: one line, naming file, line and field.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Field {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// A node of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceNode {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub gpus: i64,
    /// Empty for a node without GPUs.
    pub model: Arc<str>,
}

impl TraceNode {
    /// The empty node as the policies see it: every card free.
    pub fn res(&self) -> NodeRes {
        NodeRes {
            cpu_left: self.cpu_milli,
            cpu_capacity: self.cpu_milli,
            cards: SmallVec::from_elem(1000, self.gpus as usize),
            model: self.model.clone(),
        }
    }
}

/// A task of the trace, as the simulator reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct TracePod {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub num_gpu: i64,
    /// Per card: `gpu_milli` clamped to 0..=1000 as `pod_csv_to_yaml.py` writes it, 0
    /// without cards.
    pub gpu_milli: i64,
    /// Allowed models, `|`-separated; empty for any.
    pub gpu_spec: Arc<str>,
}

impl TracePod {
    /// The task as the policies see it (`GetPodResource`: cpu 0 counts as 100m).
    pub fn res(&self) -> PodRes {
        PodRes {
            cpu: if self.cpu_milli == 0 {
                100
            } else {
                self.cpu_milli
            },
            milli: self.gpu_milli,
            num: self.num_gpu,
            model: self.gpu_spec.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct NodeTrace {
    pub path: PathBuf,
    pub nodes: Vec<TraceNode>,
}

impl NodeTrace {
    pub fn total_gpus(&self) -> i64 {
        self.nodes.iter().map(|n| n.gpus).sum()
    }
}

#[derive(Debug, Clone)]
pub struct PodTrace {
    pub path: PathBuf,
    /// The file name without `.csv`: the `workload` column.
    pub stem: String,
    pub pods: Vec<TracePod>,
}

fn read(path: &Path) -> Result<String, TraceError> {
    std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// One CSV line split into fields; double quotes as RFC 4180 has them (no newlines inside).
fn split(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' if quoted => quoted = false,
            '"' if cur.is_empty() => quoted = true,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quoted field".into());
    }
    out.push(cur);
    Ok(out)
}

struct Table<'a> {
    path: &'a Path,
    columns: Vec<String>,
    rows: Vec<(usize, Vec<String>)>,
}

impl<'a> Table<'a> {
    fn parse(path: &'a Path, text: &str) -> Result<Table<'a>, TraceError> {
        let err = |line, message| TraceError::Field {
            path: path.to_path_buf(),
            line,
            message,
        };
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let (_, header) = lines
            .find(|(_, l)| !l.trim().is_empty())
            .ok_or_else(|| err(1, "empty file, expected a header line".into()))?;
        let columns = split(header.trim_start_matches('\u{feff}'))
            .map_err(|m| err(1, m))?
            .into_iter()
            .map(|c| c.trim().to_string())
            .collect();
        let mut rows = Vec::new();
        for (n, line) in lines {
            if line.trim().is_empty() {
                continue;
            }
            rows.push((
                n,
                split(line.trim_end_matches('\r')).map_err(|m| err(n, m))?,
            ));
        }
        Ok(Table {
            path,
            columns,
            rows,
        })
    }

    fn column(&self, name: &str) -> Result<usize, TraceError> {
        self.columns
            .iter()
            .position(|c| c == name)
            .ok_or_else(|| TraceError::Field {
                path: self.path.to_path_buf(),
                line: 1,
                message: format!("no column `{name}` in the header"),
            })
    }

    fn text<'r>(
        &self,
        row: &'r (usize, Vec<String>),
        col: usize,
        name: &str,
    ) -> Result<&'r str, TraceError> {
        row.1
            .get(col)
            .map(|s| s.trim())
            .ok_or_else(|| TraceError::Field {
                path: self.path.to_path_buf(),
                line: row.0,
                message: format!(
                    "field `{name}`: missing (the line has {} fields)",
                    row.1.len()
                ),
            })
    }

    /// An integer; a decimal is cut toward zero as Python's `%d` cuts it; empty or
    /// `nan` is `missing`.
    fn int(
        &self,
        row: &(usize, Vec<String>),
        col: usize,
        name: &str,
        missing: Option<i64>,
    ) -> Result<i64, TraceError> {
        let s = self.text(row, col, name)?;
        let bad = |what: &str| TraceError::Field {
            path: self.path.to_path_buf(),
            line: row.0,
            message: format!("field `{name}`: {what}, found {s:?}"),
        };
        if s.is_empty() || s.eq_ignore_ascii_case("nan") {
            return missing.ok_or_else(|| bad("expected a number"));
        }
        let v = match s.parse::<i64>() {
            Ok(v) => v,
            Err(_) => match s.parse::<f64>() {
                Ok(f) if f.is_finite() && f.abs() < 9.0e15 => f.trunc() as i64,
                _ => return Err(bad("expected a number")),
            },
        };
        if v < 0 {
            return Err(bad("expected a number not below 0"));
        }
        Ok(v)
    }
}

/// Reads a node CSV.
pub fn read_nodes(path: &Path) -> Result<NodeTrace, TraceError> {
    let text = read(path)?;
    let t = Table::parse(path, &text)?;
    let (sn, cpu, mem, gpu, model) = (
        t.column("sn")?,
        t.column("cpu_milli")?,
        t.column("memory_mib")?,
        t.column("gpu")?,
        t.column("model")?,
    );
    let mut nodes = Vec::with_capacity(t.rows.len());
    for row in &t.rows {
        let gpus = t.int(row, gpu, "gpu", None)?;
        if gpus > 64 {
            return Err(TraceError::Field {
                path: path.to_path_buf(),
                line: row.0,
                message: format!("field `gpu`: at most 64 cards per node, found {gpus}"),
            });
        }
        let m = t.text(row, model, "model")?;
        let m = if m.eq_ignore_ascii_case("nan") || gpus == 0 {
            ""
        } else {
            m
        };
        nodes.push(TraceNode {
            name: t.text(row, sn, "sn")?.to_string(),
            cpu_milli: t.int(row, cpu, "cpu_milli", None)?,
            memory_mib: t.int(row, mem, "memory_mib", None)?,
            gpus,
            model: Arc::from(m),
        });
    }
    Ok(NodeTrace {
        path: path.to_path_buf(),
        nodes,
    })
}

/// Reads a pod CSV.
pub fn read_pods(path: &Path) -> Result<PodTrace, TraceError> {
    let text = read(path)?;
    let t = Table::parse(path, &text)?;
    let (name, cpu, mem, num, milli) = (
        t.column("name")?,
        t.column("cpu_milli")?,
        t.column("memory_mib")?,
        t.column("num_gpu")?,
        t.column("gpu_milli")?,
    );
    let spec = t.column("gpu_spec").ok();
    let mut pods = Vec::with_capacity(t.rows.len());
    for row in &t.rows {
        let num_gpu = t.int(row, num, "num_gpu", None)?;
        let (gpu_milli, gpu_spec) = if num_gpu == 0 {
            (0, "")
        } else {
            let m = t.int(row, milli, "gpu_milli", Some(0))?;
            let s = match spec {
                Some(c) => t.text(row, c, "gpu_spec")?,
                None => "",
            };
            let s = if s.eq_ignore_ascii_case("nan") { "" } else { s };
            (m.min(1000), s)
        };
        // `pod_csv_to_yaml.py` drops empty names between `|`.
        let spec: Vec<&str> = gpu_spec.split('|').filter(|s| !s.is_empty()).collect();
        pods.push(TracePod {
            name: t.text(row, name, "name")?.to_string(),
            cpu_milli: t.int(row, cpu, "cpu_milli", None)?,
            memory_mib: t.int(row, mem, "memory_mib", Some(0))?,
            num_gpu,
            gpu_milli,
            gpu_spec: Arc::from(spec.join("|")),
        });
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(PodTrace {
        path: path.to_path_buf(),
        stem,
        pods,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn reads_nodes_and_pods_as_the_simulator_does() {
        let dir = tempfile::tempdir().unwrap();
        let n = write(
            dir.path(),
            "n.csv",
            "sn,cpu_milli,memory_mib,gpu,model\na,64000,262144,2,P100\nb,32000,262144,0,\n",
        );
        let nodes = read_nodes(&n).unwrap();
        assert_eq!(nodes.total_gpus(), 2);
        assert_eq!(&*nodes.nodes[1].model, "");
        assert_eq!(nodes.nodes[0].res().cards.as_slice(), &[1000, 1000]);
        let p = write(
            dir.path(),
            "openb_pod_list_x.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n\
             p0,12000,16384,1,460,,LS\n\
             p1,4000,100,0,0,,BE\n\
             p2,8000,100,2,1500,V100M16||V100M32,LS\n\
             p3,0,100,0,700,G2,LS\n",
        );
        let pods = read_pods(&p).unwrap();
        assert_eq!(pods.stem, "openb_pod_list_x");
        assert_eq!(pods.pods[0].res().milli, 460);
        assert_eq!(pods.pods[2].gpu_milli, 1000, "above 1000 is one card");
        assert_eq!(&*pods.pods[2].gpu_spec, "V100M16|V100M32");
        assert_eq!((pods.pods[3].gpu_milli, &*pods.pods[3].gpu_spec), (0, ""));
        assert_eq!(pods.pods[3].res().cpu, 100, "cpu 0 counts as 100m");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "p.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,1,1\np1,x,1,1,1\n",
        );
        let e = read_pods(&p).unwrap_err().to_string();
        assert!(
            e.ends_with("p.csv:3: field `cpu_milli`: expected a number, found \"x\""),
            "{e}"
        );
        let p = write(dir.path(), "q.csv", "name,cpu_milli\n");
        let e = read_pods(&p).unwrap_err().to_string();
        assert!(
            e.ends_with("q.csv:1: no column `memory_mib` in the header"),
            "{e}"
        );
        let p = write(
            dir.path(),
            "r.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1\n",
        );
        let e = read_pods(&p).unwrap_err().to_string();
        assert!(e.contains("r.csv:2: field `num_gpu`: missing"), "{e}");
        let p = write(
            dir.path(),
            "s.csv",
            "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,-2,T4\n",
        );
        let e = read_nodes(&p).unwrap_err().to_string();
        assert!(
            e.contains("s.csv:2: field `gpu`: expected a number not below 0"),
            "{e}"
        );
        let e = read_nodes(&dir.path().join("none.csv"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none.csv"), "{e}");
    }
}
