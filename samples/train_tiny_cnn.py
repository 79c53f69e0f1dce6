"""A small CNN's training loop marked for hroofline: hroofline profile --gpu cpu --script samples/train_tiny_cnn.py"""

import torch
from torch import nn

import hroofline


def build() -> nn.Module:
    layers = [nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU()]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


if __name__ == "__main__":
    model, loss_fn = hroofline.annotate(build()), nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images, labels = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    for _ in range(3):
        with hroofline.profiled_step():
            with hroofline.phase("forward"):
                loss = loss_fn(model(images), labels)
            with hroofline.phase("backward"):
                loss.backward()
            with hroofline.phase("optimizer"):
                optimizer.step()
                optimizer.zero_grad()
