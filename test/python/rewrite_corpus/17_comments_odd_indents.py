for x, y in loader:
# a comment at column 0 inside the loop
    opt.zero_grad()
      # a comment deeper than the code
    out = net(x)
# another one at column 0, between forward lines
    loss = crit(out, y)
        # and one very deep
    loss.backward()
    opt.step()
