"""SimPy reference model of seawall-sim's `bronson` scenario under `naive`, for timing only.

Same numbers as scenarios/bronson.toml: 280 QPS Poisson for 60 s, edge deadline 2 s; the app
retries once, immediately, after a 1 s timeout; the database has 30 workers, exponential 50 ms
service, 10x slower while more than 300 requests arrived in the last second (ten 100 ms
buckets), a queue bound of 10,000 (refused attempts fail at once and are retried at once); an
outage holds requests from 10 s to 20 s. Work whose caller timed out is still done.

Prints one JSON line: wall seconds, CPU seconds of this thread (`time.thread_time()`), edge requests, goodput, events (SimPy steps).
"""

import json
import random
import sys
import time

import simpy


def main(seed=1, duration=60.0):
    env = simpy.Environment()
    db = simpy.Resource(env, capacity=30)
    rng = random.Random(seed)
    ring = [0] * 10
    st = {"slot": 0, "sum": 0, "good": 0, "edge": 0}

    def advance(now):
        slot = int(now / 0.1)
        if slot > st["slot"]:
            for k in range(st["slot"] + 1, min(slot, st["slot"] + 10) + 1):
                st["sum"] -= ring[k % 10]
                ring[k % 10] = 0
            st["slot"] = slot

    def db_attempt():
        advance(env.now)
        ring[st["slot"] % 10] += 1
        st["sum"] += 1
        if len(db.queue) >= 10000:  # the tier's queue_limit: refused at once
            return False
        with db.request() as req:
            yield req
            if 10.0 <= env.now < 20.0:
                yield env.timeout(20.0 - env.now)
            advance(env.now)
            factor = 10.0 if st["sum"] > 300 else 1.0
            yield env.timeout(rng.expovariate(1 / 0.05) * factor)
        return True

    def app_call():
        for _ in range(2):
            work = env.process(db_attempt())
            timer = env.timeout(1.0)
            done = yield work | timer
            if work in done and done[work]:
                return True
        return False

    def user():
        start = env.now
        ok = yield env.process(app_call())
        if ok and env.now - start <= 2.0:
            st["good"] += 1

    def arrivals():
        while True:
            yield env.timeout(rng.expovariate(280.0))
            if env.now >= duration:
                return
            st["edge"] += 1
            env.process(user())

    env.process(arrivals())
    steps = 0
    t0, c0 = time.perf_counter(), time.thread_time()
    until = duration + 2.0
    while env.peek() <= until:
        env.step()
        steps += 1
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    print(json.dumps({"model": "simpy-bronson-naive", "duration_s": duration, "wall_s": wall, "cpu_s": cpu, "edge": st["edge"],
                      "good": st["good"], "events": steps}))


if __name__ == "__main__":
    main(seed=int(sys.argv[1]) if len(sys.argv) > 1 else 1,
         duration=float(sys.argv[2]) if len(sys.argv) > 2 else 60.0)
