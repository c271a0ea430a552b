for x, y in loader:
    opt.zero_grad()
    msg = "a string continued \
    on the next line"
    out = net(x)
    loss = crit(out, y)
    loss.backward()
    opt.step()
