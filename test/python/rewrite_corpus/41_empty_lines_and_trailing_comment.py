for x, y in loader:

    opt.zero_grad()

    out = net(x)    # forward

    loss = crit(out, y)    # loss


    loss.backward()
    opt.step()
# end of the cell
