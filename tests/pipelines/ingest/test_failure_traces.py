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
