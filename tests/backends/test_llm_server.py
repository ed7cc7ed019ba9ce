"""The fake OpenAI server itself: determinism of faults and the stand-alone process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.support.openai_server import FakeOpenAIServer, FaultPlan, Reply


def test_fault_choice_depends_only_on_body_attempt_and_seed() -> None:
    plan = FaultPlan(rate=0.5, seed=0)
    picks = [plan.pick(f"body{i}", attempt) for i in range(50) for attempt in range(3)]
    assert picks == [plan.pick(f"body{i}", attempt) for i in range(50) for attempt in range(3)]
    assert set(picks) - {None} == set(plan.kinds)
    assert picks != [FaultPlan(rate=0.5, seed=1).pick(f"body{i}", a) for i in range(50) for a in range(3)]
    assert all(FaultPlan(rate=0.0).pick(f"b{i}", 0) is None for i in range(50))


def test_faults_reshape_replies() -> None:
    plan = FaultPlan(retry_after_s=0.5, slow_s=2.0)
    base = Reply(text='{"a": 1}')
    assert plan.apply("429", base).headers == {"Retry-After": "0.5"}
    assert plan.apply("slow", base).delay_s == 2.0
    assert plan.apply("fenced", base).text == '```json\n{"a": 1}\n```'
    assert plan.apply("garbage", base).text == '{"a"'
    assert plan.apply("listbody", base).body == "[]"
    assert (plan.apply("truncated", base).text, plan.apply("truncated", base).finish_reason) == ('{"a"', "length")


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def test_models_endpoint_and_request_counting() -> None:
    with FakeOpenAIServer() as srv:
        listing = get_json(f"{srv.base_url}/models")
        assert isinstance(listing, dict) and listing["data"][0]["object"] == "model"
        assert srv.request_count == 1 and srv.requests == []


def test_runs_as_its_own_process() -> None:
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "tests.support.openai_server", "--port", "0", "--latency-ms", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        assert isinstance(get_json(f"{base_url}/models"), dict)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
