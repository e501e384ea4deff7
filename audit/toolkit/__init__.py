"""What the checks measure with: tensor comparisons, the numerical Jacobian, rounding, torch.compile and DDP
helpers, and the exceptions a property raises. Below the checks; imports none of them."""
