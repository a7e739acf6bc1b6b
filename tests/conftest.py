"""Shared test settings: keep torch to the cores this box has."""

import os

import torch

torch.set_num_threads(int(os.environ.get("OPENMANUS_TEST_THREADS", "2")))
