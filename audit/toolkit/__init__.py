"""What the checks measure with beyond the replay kit: gradcheck's options for a cell, rounding noise, torch.compile
and DDP helpers, the known torch bugs, and the exceptions a property raises. Below the checks; imports none of
them."""
