# the case: a multi-line string inside the loop body
for x, y in loader:
    opt.zero_grad()
    note = """step
done"""
    out = net(x)
    loss = crit(out, y)
    loss.backward()
    opt.step()
