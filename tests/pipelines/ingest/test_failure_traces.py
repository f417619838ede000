"""Adapters of the failure-record traces on tiny fixtures: typed rows, bad rows named."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from predops.pipelines.ingest.traces.alibaba_ssd import read_alibaba_ssd
from predops.pipelines.ingest.traces.failure_records import TraceError
from predops.pipelines.ingest.traces.lanl_failures import is_hardware_replacement, read_lanl
from predops.pipelines.ingest.traces.olcf_alpine import read_olcf_alpine

LANL_HEADER = (
    "System,machine type,nodes,procstot,procsinnode,nodenum,nodenumz,node install,"
    "node prod,node decom,fru type,mem,cputype,memtype,num intercon,purpose,Prob Started,"
    "Prob Fixed,Down Time,Facilities,Hardware,Human Error,Network,Undetermined,Software,"
    "Same Event"
)


def _write(path: Path, text: str) -> Path:
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_lanl_rows_causes_dates_and_bad_rows(tmp_path: Path) -> None:
    rows = [
        "2,cluster,49.0,6152.0,128.0,1.0,1.0,Nov-96,Jan-97,5-Nov,part,32.0,1,1,12,compute,"
        "2/23/1997 13:00,2/23/1997 14:00,60,,CPU,,,,,No",
        "2,cluster,49.0,6152.0,128.0,1.0,1.0,Nov-96,Jan-97,current,part,32.0,1,1,12,compute,"
        "3/3/1997 10:00,3/3/1997 10:25,25,,Maintenance,,,,,No",
        "2,cluster,49.0,6152.0,128.0,1.0,2.0,Nov-96,Jan-97,5-Nov,part,32.0,1,1,12,compute,"
        "3/4/1997 10:00,3/4/1997 11:00,60,,,,,,DST,No",
        "17,,,,,,,,,,,,,,,,1/8/1997 8:40,1/8/1997 8:50,10,,Other,,,,,No",
        "2,cluster,49.0,6152.0,128.0,1.0,1.0,Nov-96,Jan-97,5-Nov,part,32.0,1,1,12,compute,"
        "yesterday,3/4/1997 11:00,60,,,,,,DST,No",
    ]
    f = _write(tmp_path / "lanl.csv.gz", LANL_HEADER + "\n" + "\n".join(rows) + "\n")
    rec = read_lanl(f)
    df = rec.frame
    assert df.height == 3
    assert df["cause"].to_list() == ["hardware", "hardware", "software"]
    assert df["sub_cause"].to_list() == ["CPU", "Maintenance", "DST"]
    assert is_hardware_replacement(df).to_list() == [True, False, False]
    assert df["installed"][0].year == 1996 and df["installed"][0].month == 11
    assert df["decommissioned"][0].year == 2005 and df["decommissioned"][0].month == 11
    assert df["in_service"].to_list() == [False, True, False]
    assert df["down_min"].to_list() == [60.0, 25.0, 60.0]
    q = rec.quarantine.to_dict()
    assert q["rows"] == 2
    assert q["named"][0] == "lanl.csv.gz row 4 field nodes: '' is not a node count"
    assert "row 5 field Prob Started: 'yesterday' is not a time m/d/yyyy h:mm" in q["named"][1]


def test_alibaba_ssd_flag_and_time(tmp_path: Path) -> None:
    text = (
        "model,failure_time,failure,app,disk_id,node_id,rack_id,machine_room_id\n"
        "A2,2018-01-02 19:15:32,1,RM,1,2,3,4\n"
        "C1,2018-01-03 01:00:00,0,WSM,5,6,7,8\n"
        "C1,2018-13-03 01:00:00,1,WSM,5,6,7,8\n"
        ",2018-01-04 01:00:00,1,WSM,5,6,7,8\n"
        "B3,2018-01-05 02:00:00,1,,9,9,x,9\n"
        "B3,2018-01-06 02:00:00,1,none,10,10,11,12\n"
    )
    got = read_alibaba_ssd(_write(tmp_path / "ssd_failure_tag.csv", text))
    assert got.frame["model"].to_list() == ["A2", "B3"]
    assert str(got.frame["at"].dtype) == "Datetime(time_unit='us', time_zone='UTC')"
    named = got.quarantine.named
    assert got.quarantine.rows == 4
    assert named[0] == "ssd_failure_tag.csv row 2 field failure: '0' is not the failure flag 1"
    assert "row 3 field failure_time: '2018-13-03 01:00:00'" in named[1]
    assert "row 4 field model: '' is not a drive model" in named[2]
    assert "row 5 field rack_id: 'x' is not an integer id" in named[3]


def test_alpine_zone_and_positions(tmp_path: Path) -> None:
    text = (
        ",Timestamp,SSC,SSU,Enclosure,Slot,Seagate slot,Rack unit,Unique enclosure,Rack id,"
        "slot bin hor,slot bin ver\n"
        "0,2019-01-04T14:41:12-0500,2,g,1,29,28,1,1,8,7,3\n"
        "1,2019-01-04T15:47:17-0500,5,d,2,106,22,25,6,18,13,2\n"
        "2,2019-01-04T16:47:17,5,d,2,23,22,25,6,18,13,2\n"
    )
    got = read_olcf_alpine(_write(tmp_path / "alpine_formatted_data.csv", text))
    assert got.frame.height == 2
    assert got.frame["at"][0].hour == 19  # 14:41 at -05:00 is 19:41 UTC
    assert got.installed_base_proxy() == {
        "enclosures": 2,
        "slots_per_enclosure": 106,
        "disks": 212,
    }
    assert got.quarantine.named == [
        "alpine_formatted_data.csv row 3 field Timestamp: '2019-01-04T16:47:17' is not an "
        "ISO 8601 time with zone"
    ]


def test_missing_file_and_columns(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        read_olcf_alpine(tmp_path)
    _write(tmp_path / "alpine_formatted_data.csv", "Timestamp,SSC\n2019-01-04T14:41:12-0500,2\n")
    with pytest.raises(TraceError, match=r"missing column\(s\) \['Enclosure'"):
        read_olcf_alpine(tmp_path)


def test_grid5000_intervals_and_bad_rows(tmp_path: Path) -> None:
    from predops.pipelines.ingest.traces.grid5000 import read_grid5000

    text = (
        "# event_id component_id node_id platform_id node_name event_type "
        "event_start_time event_stop_time event_end_reason\n"
        "    0\t    0\t    0\t    5\tG1/site1/c1/node1\t 0\t 1115811139\t 1116857352\t NULL\n"
        "    1\t    0\t    0\t    5\tG1/site1/c1/node1\t 1\t 1116857352\t 1116857835\t NULL\n"
        "    2\t    0\t    0\t    5\tG1/site1/c1/node1\t 7\t 1116857835\t 1116872164\t NULL\n"
        "    3\t    0\t    1\t    5\tsomewhere/node2\t 0\t 1116857835\t 1116872164\t NULL\n"
        "    4\t    0\t    1\t    5\tG1/site2/c3/node2\t 0\t 1116872164\t 1116857835\t NULL\n"
    )
    f = _write(tmp_path / "event_trace.tab.gz", text)
    got = read_grid5000(tmp_path)
    assert got.frame["event_type"].to_list() == [0, 1]
    assert got.frame["cluster"].to_list() == ["site1/c1", "site1/c1"]
    assert got.frame["start"][0].year == 2005
    assert got.quarantine.named == [
        f"{f.name} row 3 field event_type: '7' is not 0 or 1",
        f"{f.name} row 4 field node_name: 'somewhere/node2' is not G1/site/cluster/node",
        f"{f.name} row 5 field event_stop_time: 1116857835 is before the start 1116872164",
    ]


def test_titan_lives_and_bad_rows(tmp_path: Path) -> None:
    from predops.pipelines.ingest.traces.titan_gpu import read_titan

    (tmp_path / "data").mkdir()
    text = (
        "SN,location,insert,remove,duration,out,event\n"
        "0320117100061,c9-3c1s2n1,2017-04-09 21:36:19,2019-08-01 20:07:33,1.0,False,\n"
        "0320117100062,c9-3c1s2n1,2014-04-09 21:36:19,2017-04-01 20:07:33,1.0,True,DBE\n"
        "0320117100063,c9-3c1s2,2017-04-09 21:36:19,2019-08-01 20:07:33,1.0,False,\n"
        "0320117100064,c1-0c0s0n0,,2019-08-01 20:07:33,,,OTB\n"
        "0320117100065,c1-0c0s0n0,2017-04-09 21:36:19,2019-08-01 20:07:33,1.0,False,XID\n"
    )
    _write(tmp_path / "data" / "gc_full.csv.gz", text)
    got = read_titan(tmp_path)
    # Sorted by insert; the life without one (row 4: start unknown) is kept, last.
    assert got.frame["event"].to_list() == ["DBE", None, "OTB"]
    assert got.frame["insert"].null_count() == 1
    assert got.frame.select("col", "row", "cage", "slot", "node").row(0) == (9, 3, 1, 2, 1)
    assert got.quarantine.rows == 2
    assert "row 3 field location: 'c9-3c1s2' is not a location" in got.quarantine.named[0]
    assert "row 5 field event: 'XID' is not DBE, OTB or empty" in got.quarantine.named[1]
