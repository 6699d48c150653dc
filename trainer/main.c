/* placeholder while the modules land */
int main(void)
{
	return 0;
}
