#!/usr/bin/env python3
"""Writes the seed corpora of the aclimdb, torch_state_dict, archive and study_rows harnesses
(fuzz/corpus/<name>/) from the repository's fixtures and a few hand-made inputs. Standard
library only. Usage: python3 fuzz/make_seeds.py"""
import gzip
import io
import pathlib
import tarfile
import zipfile

root = pathlib.Path(__file__).resolve().parent
fixtures = root.parent / "tests" / "fixtures" / "torch_state_dict"


def seed(harness, name, data):
    d = root / "corpus" / harness
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


# aclImdb: file names, one a line.
seed("aclimdb", "names", "0_3.txt\n12_10.txt\n7_1.txt\n3_8.txt\n")
seed("aclimdb", "ignored", "urls_pos.txt\n1_7.feat\n5_2.txt\nREADME\n")
seed("aclimdb", "bad_rating", "4_11.txt\n9_0.txt\n")

# PyTorch checkpoints: the zip layout (views.bin), the legacy layout, a pickle that must be refused.
for name in ["views.bin", "bert_random_legacy.bin", "evil.bin"]:
    seed("torch_state_dict", name, (fixtures / name).read_bytes())

# Archives: first byte 0 = gunzip, 1 = read_archive_files, 2 = extract_archive.
seed("archive", "gzip", b"\0" + gzip.compress(b"label\ttext\n1\tgood\n", mtime=0))
seed("archive", "gzip_two_members", b"\0" + gzip.compress(b"a\n", mtime=0) + gzip.compress(b"b\n", mtime=0))


def tar_gz(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.USTAR_FORMAT) as t:
        for name, content in entries:
            info = tarfile.TarInfo(name)
            info.mtime = 0
            if content is None:
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            else:
                info.size = len(content)
                t.addfile(info, io.BytesIO(content))
    return buf.getvalue()


tree = [("aclImdb", None), ("aclImdb/train", None), ("aclImdb/train/pos/0_9.txt", b"great"),
        ("aclImdb/train/neg/1_2.txt", b"dull")]
seed("archive", "tar_gz_read", b"\1" + tar_gz(tree))
seed("archive", "tar_gz_extract", b"\2" + tar_gz(tree))
seed("archive", "tar_gz_dotdot", b"\2" + tar_gz([("../escape.txt", b"x")]))
zbuf = io.BytesIO()
with zipfile.ZipFile(zbuf, "w", zipfile.ZIP_STORED) as z:
    z.writestr(zipfile.ZipInfo("archive/data.pkl", (1980, 1, 1, 0, 0, 0)), b"\x80\x02}q\x00.")
    z.writestr(zipfile.ZipInfo("archive/data/0", (1980, 1, 1, 0, 0, 0)), b"\0" * 16)
seed("archive", "zip_read", b"\1" + zbuf.getvalue())
seed("archive", "zip_extract", b"\2" + zbuf.getvalue())

# Study rows: NUL-separated cells ('-' keeps a cell as written), see fuzz_study_rows.cpp.
seed("study_rows", "as_written", "")
seed("study_rows", "states", "WAITING\0-\0-\0-\0-\0-\0-\0INF_POS\0FINITE\0")
float_dist = '{"name": "FloatDistribution", "attributes": {"low": 0.5, "high": 2.0, "log": true, "step": null}}'
cat_dist = '{"name": "CategoricalDistribution", "attributes": {"choices": ["a", true, null, 1.5]}}'
seed("study_rows", "distributions", "\0".join(["-", "-", "-", "3.0", cat_dist, "k2", "inf", "-", "-",
                                                 '{"a": [1, 2]}', '"reason"', "MAXIMIZE", "[]", "7", float_dist,
                                                 "2026-11-28 04:31:00.123456"]))
seed("study_rows", "datetimes", "-\0" + "2026-02-30 25:61:61\0" + "2026-11-28T04:31:00\0")
