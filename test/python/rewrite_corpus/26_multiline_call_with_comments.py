for x, y in loader:
    opt.zero_grad()
    out = net(
        x,  # the inputs
# a comment at column 0 inside the call
        # the mask is not used
    )
    loss = crit(
        out,
        y,
    )
    loss.backward()
    opt.step()
