"""A study written by qnum loads in Optuna, and a study Optuna continues loads in qnum.

    python3 check_optuna_load.py QNUM_BINARY WORK_DIR

Exit 77 (CTest: skipped) when optuna cannot be imported; 1 with the first difference.
"""
import json
import math
import os
import sqlite3
import subprocess
import sys

try:
    import optuna
except ImportError:
    print("optuna is not installed: skipped")
    sys.exit(77)

qnum, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
db = os.path.join(work, "qnum_written.db")
for suffix in ("", "-wal", "-shm"):
    if os.path.exists(db + suffix):
        os.remove(db + suffix)
url = "sqlite:///" + db
optuna.logging.set_verbosity(optuna.logging.WARNING)


def run(*args):
    out = subprocess.run([qnum, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


run("search", "--objective", "branin", "--sampler", "random", "--trials", "12", "--seed", "3",
    "--storage", url, "--study-name", "branin", "--json")
run("search", "--objective", "mixed-precision", "--sampler", "grid", "--trials", "200",
    "--storage", url, "--study-name", "mp", "--json")

# 1. The schema is Optuna's own: compare with a database Optuna creates.
ref = os.path.join(work, "optuna_ref.db")
if os.path.exists(ref):
    os.remove(ref)
optuna.create_study(study_name="ref", storage="sqlite:///" + ref)


def schema(path):
    con = sqlite3.connect(path)
    rows = con.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    version = con.execute("SELECT version_num FROM alembic_version").fetchall()
    con.close()
    return rows, version


if schema(db) != schema(ref):
    fail(f"schema differs from Optuna {optuna.__version__}'s:\n{schema(db)}\n{schema(ref)}")

# 2. Optuna reads every trial as qnum wrote it.
shown = run("study", "show", "--storage", url, "--study-name", "branin", "--json")
study = optuna.load_study(study_name="branin", storage=url)
trials = study.get_trials()
if len(trials) != 12 or len(shown["trials"]) != 12:
    fail(f"expected 12 trials, optuna sees {len(trials)}")
for t, row in zip(trials, shown["trials"]):
    if t.number != int(row["number"]) or t.state.name != row["state"]:
        fail(f"trial {t.number}: {t.state.name} vs {row}")
    if repr(t.value) != row["value"]:
        fail(f"trial {t.number}: value {t.value!r} vs {row['value']}")
    for name in ("x0", "x1"):
        if repr(t.params[name]) != row["params_" + name]:
            fail(f"trial {t.number}: {name} {t.params[name]!r} vs {row['params_' + name]}")
    if not (t.datetime_start <= t.datetime_complete):
        fail(f"trial {t.number}: datetimes {t.datetime_start} {t.datetime_complete}")
if abs(study.best_value - shown["best_trial"]["value"]) != 0:
    fail("best value differs")

# 3. Optuna continues qnum's grid study: its GridSampler sees qnum's grid ids (same order
#    and search_space attribute) and runs exactly the 56 points qnum left.
space = {f"layer{i}_width": [2, 4, 8, 16] for i in range(4)}
mp = optuna.load_study(study_name="mp", storage=url, sampler=optuna.samplers.GridSampler(space))


def mp_objective(trial):
    return sum(trial.suggest_categorical(f"layer{i}_width", [2, 4, 8, 16]) for i in range(4))


mp.optimize(mp_objective, n_trials=1000)
done = mp.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
points = {tuple(t.params[f"layer{i}_width"] for i in range(4)) for t in done}
if len(done) != 256 or len(points) != 256:
    fail(f"grid continued by Optuna: {len(done)} trials, {len(points)} distinct points (want 256)")
if not mp.sampler.is_exhausted(mp):
    fail("Optuna's GridSampler does not see the grid as exhausted")

# 4. qnum reads the study Optuna extended.
shown = run("study", "show", "--storage", url, "--study-name", "mp", "--json")
if len(shown["trials"]) != 256:
    fail(f"qnum sees {len(shown['trials'])} trials after Optuna's, want 256")
if shown["best_trial"]["value"] != min(t.value for t in done):
    fail("qnum's best trial differs from Optuna's")
print(f"ok: qnum's studies load in Optuna {optuna.__version__} and back")
