// `files_agent`: an agent in JavaScript that reads files through the SDK's `Files` helper (the
// `files` import: one host call per file or listing). Under `jsfiles` (domain `domain`) it
// serves, for each regular file of the directory `dir`:
//   jsfiles.bytes      (0.0, uint64)  the file's size as read
//   jsfiles.first_line (0.1, text)    its first line
// and jsfiles.probe (0.2, text, singular): what reading the path `probe` gave, "N bytes" or
// the FileError's message. Parameters: {"domain": 48, "dir": "/data", "probe": "/data/x"}
import * as host from "wasmon:collector/files@0.1.0";
import { FileError, Files, Metric, Tree, UnknownPmid, exportAgent } from "./wasmon_guest.js";

// Bounds: a file or listing past them is a hostile tree, reported as an error, not read.
const MAX_FILE = 1 << 20;
const MAX_ENTRIES = 4096;

class FilesAgent extends Tree {
  constructor(params) {
    const domain = params.integer("domain", 48, { min: 1, max: 510 });
    const indom = domain * (1 << 22);
    super("jsfiles", {
      "jsfiles.bytes": new Metric([domain, 0, 0], "instant", "byte", "size of each file of dir", indom, "uint64"),
      "jsfiles.first_line": new Metric([domain, 0, 1], "discrete", "", "first line of each file of dir", indom, "text"),
      "jsfiles.probe": new Metric([domain, 0, 2], "discrete", "", "what reading probe gave", undefined, "text"),
    });
    this.domain = domain;
    this.dir = params.string("dir", "/data");
    this.probe = params.string("probe", "/data/probe");
    this.files = new Files(host);
  }

  // [[name, bytes]] of the directory's readable regular files (a subdirectory is skipped).
  contents() {
    const out = [];
    for (const name of this.files.list(this.dir, MAX_ENTRIES) ?? []) {
      try {
        out.push([name, this.files.readFile(`${this.dir}/${name}`, MAX_FILE)]);
      } catch (e) {
        if (!(e instanceof FileError)) throw e;
      }
    }
    return out;
  }

  fetch(pmid) {
    if (pmid.domain !== this.domain || pmid.cluster !== 0) throw new UnknownPmid();
    switch (pmid.item) {
      case 0:
        return this.contents().map(([name, bytes]) => [name, bytes.length]);
      case 1:
        return this.contents().map(([name, bytes]) => [name, new TextDecoder().decode(bytes).split("\n")[0]]);
      case 2:
        try {
          return `${this.files.readFile(this.probe, MAX_FILE).length} bytes`;
        } catch (e) {
          if (e instanceof FileError) return `${e.code}: ${e.message}`;
          throw e;
        }
      default:
        throw new UnknownPmid();
    }
  }
}

export const { namespace, metrics } = exportAgent(FilesAgent);
