"""What a dump's ``dumpstatus.json`` says: whether the multistream job finished, and which
data and index files (with sizes and checksums) it wrote, as pairs (one, or one per part)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from pipeline.errors import DumpNotReadyError, SourceError

__all__ = ["DumpFile", "DumpStatus", "MultistreamPart", "parse_dumpstatus"]

log = logging.getLogger(__name__)

MULTISTREAM_JOB = "articlesmultistreamdump"
RECOMBINE_JOB = "articlesmultistreamdumprecombine"

# Combined files: enwiki-20240601-pages-articles-multistream.xml.bz2 / -index.txt.bz2;
# parts: enwiki-20240601-pages-articles-multistream3.xml-p1p41242.bz2 /
# enwiki-20240601-pages-articles-multistream-index3.txt-p1p41242.bz2.
DATA_FILE_RE = re.compile(r"-pages-articles-multistream(?P<n>\d*)\.xml(?P<range>-p\d+p\d+)?\.bz2$")
_INDEX_RE = re.compile(
    r"-pages-articles-multistream-index(?P<n>\d*)\.txt(?P<range>-p\d+p\d+)?\.bz2$"
)


@dataclass(frozen=True, slots=True)
class DumpFile:
    """A file listed in dumpstatus.json."""

    name: str
    url: str  # absolute
    size: int | None
    sha1: str | None
    md5: str | None


@dataclass(frozen=True, slots=True)
class MultistreamPart:
    """A multistream data file and its index (one pair, or one per part of a split dump)."""

    data: DumpFile
    index: DumpFile


@dataclass(frozen=True, slots=True)
class DumpStatus:
    """What dumpstatus.json says about the multistream files of one dump."""

    job: str  # the job whose files are read
    parts: tuple[MultistreamPart, ...]
    job_status: dict[str, str]  # every job -> its status

    @property
    def data_size(self) -> int:
        """Total bytes of the multistream data file(s)."""
        return sum(p.data.size or 0 for p in self.parts)


def _multistream_parts(job: dict, dir_url: str, job_name: str) -> tuple[MultistreamPart, ...]:
    files = job.get("files") or {}
    data: dict[tuple[str, str], DumpFile] = {}
    index: dict[tuple[str, str], DumpFile] = {}
    for name, meta in files.items():
        if "/" in name or name.startswith(".") or not isinstance(meta, dict):
            raise SourceError(f"dumpstatus.json: job {job_name} lists a bad file name {name!r}")
        size = meta.get("size")
        info = DumpFile(
            name=name,
            url=f"{dir_url}/{name}",  # mirrors keep the layout, so base/wiki/date/name is right
            size=int(size) if size is not None else None,
            sha1=meta.get("sha1"),
            md5=meta.get("md5"),
        )
        if m := DATA_FILE_RE.search(name):
            data[(m["n"], m["range"] or "")] = info
        elif m := _INDEX_RE.search(name):
            index[(m["n"], m["range"] or "")] = info
    if ("", "") in data and ("", "") in index:
        return (MultistreamPart(data[("", "")], index[("", "")]),)
    keys = sorted(
        (k for k in data if k in index and k != ("", "")),
        key=lambda k: (int(k[0] or 0), int(re.findall(r"\d+", k[1])[0]) if k[1] else 0),
    )
    return tuple(MultistreamPart(data[k], index[k]) for k in keys)


def parse_dumpstatus(doc: dict, *, wiki: str, dump_date: str, dir_url: str) -> DumpStatus:
    """Pick the multistream files from a parsed dumpstatus.json, refusing an unfinished dump.

    Big wikis list part files under ``articlesmultistreamdump`` and the single combined file
    under ``articlesmultistreamdumprecombine`` (which finishes later); small wikis list the single
    file under ``articlesmultistreamdump``. The combined file is preferred; while it is not done
    the finished parts are used."""
    jobs = doc.get("jobs")
    if not isinstance(jobs, dict):
        raise SourceError(f"{dir_url}/dumpstatus.json has no 'jobs' object")
    statuses = {name: str(job.get("status", "?")) for name, job in jobs.items()}
    label = f"{wiki} dump {dump_date}"
    if MULTISTREAM_JOB not in jobs and RECOMBINE_JOB not in jobs:
        raise SourceError(f"{label}: dumpstatus.json has no {MULTISTREAM_JOB} job")
    for job_name in (RECOMBINE_JOB, MULTISTREAM_JOB):
        job = jobs.get(job_name)
        if job is None or statuses[job_name] != "done":
            continue
        parts = _multistream_parts(job, dir_url, job_name)
        if parts:
            if job_name == MULTISTREAM_JOB and RECOMBINE_JOB in jobs:
                log.info("%s: %s not done; reading %d part files", label, RECOMBINE_JOB, len(parts))
            return DumpStatus(job_name, parts, statuses)
    states = ", ".join(
        f"job {name} is {statuses[name]!r}"
        for name in (MULTISTREAM_JOB, RECOMBINE_JOB)
        if name in statuses
    )
    done = all(statuses.get(n) == "done" for n in (MULTISTREAM_JOB, RECOMBINE_JOB) if n in jobs)
    if done:
        raise SourceError(f"{label}: finished multistream jobs list no data/index file pair")
    raise DumpNotReadyError(f"{label} is not finished: {states}; pick an earlier dump date")
