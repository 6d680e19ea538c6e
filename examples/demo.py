"""A short tour of torch-vdev: two virtual accelerators driven through ordinary PyTorch code.

No `import torch_vdev` is needed: installing the package registers the "vdev" device when torch is
imported (torch's backend autoload).
"""

import torch

accelerator = torch.accelerator.current_accelerator()
print(f"{torch.vdev.device_count()} vdev devices, accelerator = {accelerator}")
for i in range(torch.vdev.device_count()):
    print(f"  {torch.vdev.get_device_properties(i)}")

# Tensors live on a device; operators run there and results stay there.
x = torch.tensor([1.0, 2.0], device="vdev:1")
print("x + 2 =", x + 2)

# Device-generic code: pick the current device with a context manager, as with torch.cuda.
with torch.vdev.device(1):
    w = torch.randn(4, 3, device="vdev", requires_grad=True)  # lands on vdev:1
    inp = torch.randn(8, 4).to("vdev")
    loss = (inp @ w).relu().sum()
    loss.backward()
print("grad on", w.grad.device, "| current device restored to", torch.vdev.current_device())

# Copies between devices keep every byte.
y = w.detach().to("vdev:0")
assert torch.equal(y.cpu(), w.detach().cpu())
print("copied", tuple(y.shape), "from vdev:1 to", y.device)

# Mixing devices is an error here exactly as it is on CUDA: the bug shows up on CPU-only CI too.
try:
    x + y[0, :2]
except RuntimeError as e:
    print("mixing devices ->", str(e).splitlines()[0])

print("allocated on vdev:1:", torch.accelerator.memory_allocated(1), "bytes")
