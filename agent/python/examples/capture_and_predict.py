#!/usr/bin/env python3
"""What a new user does on their GPU machine: capture one training iteration
of their own model with the agent and ask a habitat-server for every GPU.

    cd agent/python && python setup.py build_ext --inplace && export PYTHONPATH=$PWD
    python examples/capture_and_predict.py --server HOST:50051 [--out my.trace.gz]

The model is an ordinary PyTorch model written here (a small CNN with a
transformer block), nothing habitat-specific; only the lines marked
"habitat" are the agent.
"""

import argparse
import sys

import torch
import torch.nn as nn

import habitat_agent  # habitat


class MyModel(nn.Module):
    def __init__(self, classes=100, width=256):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, width, 3, stride=2, padding=1), nn.BatchNorm2d(width), nn.ReLU())
        self.block = nn.TransformerEncoderLayer(width, nhead=8, batch_first=True)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = self.stem(x)                      # N, C, H, W
        x = x.flatten(2).transpose(1, 2)      # N, H*W, C
        return self.head(self.block(x).mean(1))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", required=True, help="habitat-server address, HOST:PORT")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--out", default="mymodel.trace.gz")
    p.add_argument("--counters", action="store_true", help="also collect hardware counters")
    p.add_argument("--catalog", default="aws", help="price catalog on the server ('' for none)")
    args = p.parse_args()

    model = MyModel().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch_size, 3, 64, 64, device="cuda")
    y = torch.randint(0, 100, (args.batch_size,), device="cuda")

    def train_step():
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(5):
        train_step()  # warm up

    tracker = habitat_agent.OperationTracker(model_name="mymodel",  # habitat
                                       batch_size=args.batch_size)
    with tracker.track():                                     # habitat
        train_step()
    tracker.measure_ops()                                     # habitat (optional)
    if args.counters:
        tracker.collect_counters(train_step)                  # habitat (optional)
    trace = tracker.get_tracked_trace(                        # habitat
        iteration_wall_ns=habitat_agent.time_iteration(train_step))
    trace.save(args.out)                                      # habitat
    print(f"saved {args.out}: {trace.summary['line']}")

    response = trace.predict(server=args.server, catalog=args.catalog)  # habitat
    print(habitat_agent.client.format_table(response, model_name="mymodel", precision="fp32"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
