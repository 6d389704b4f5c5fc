"""The model's modules the tracker records (habitat.v1.Module), on CPU:
module_table on a small model with a tied weight. Needs the extension built
(python setup.py build_ext --inplace in agent/python) and a torch; run from
agent/python:
    python -m unittest discover -s tests -v
"""

import unittest

import torch

from habitat_agent import tracker as tracker_module


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(4)
        self.proj = torch.nn.Linear(4, 4)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight  # tied


class ModuleTableTest(unittest.TestCase):
    def test_named_modules_order_with_own_bytes_and_shared_ones_once(self):
        table = tracker_module.module_table(Net())
        self.assertEqual([path for path, _, _ in table],
                         ["", "embed", "blocks", "blocks.0", "blocks.0.norm", "blocks.0.proj",
                          "blocks.1", "blocks.1.norm", "blocks.1.proj", "head"])
        got = {path: (cls, held) for path, cls, held in table}
        self.assertEqual(got["embed"], ("Embedding", 10 * 4 * 4))
        self.assertEqual(got["blocks.0"], ("Block", 0))  # its parameters are its children's
        self.assertEqual(got["blocks.0.norm"], ("LayerNorm", 8 * 4))
        self.assertEqual(got["blocks.1.proj"], ("Linear", (16 + 4) * 4))
        self.assertEqual(got["head"], ("Linear", 0))  # the embedding's weight, counted there
        self.assertEqual(sum(held for _, _, held in table),
                         sum(p.numel() * p.element_size() for p in Net().parameters()))

    def test_a_model_that_is_not_a_module_is_refused(self):
        with self.assertRaisesRegex(TypeError, "torch.nn.Module"):
            tracker_module.OperationTracker(model="gpt2", source="host")


if __name__ == "__main__":
    unittest.main()
